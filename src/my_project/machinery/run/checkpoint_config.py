"""eval.py and predict.py, given a checkpoint: the model and data of the run that wrote it.

`python eval.py ckpt_path=logs/train/runs/<run>/checkpoints/best.ckpt` should evaluate that
checkpoint as it was trained, whatever model and data it was trained with, without retyping
`model=... data=...` (a team's own module is not the entry config's default). The run's
resolved config is beside its checkpoints (`record.start` writes `config.yaml`); its `model`
and `data` replace the entry config's defaults, unless the command line names them.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.resume import override_key
from ..reliability.secrets import MASK

GROUPS = ("model", "data")


def groups_on_command_line() -> set[str]:
    """The config groups the command line overrides (`data.batch_size=8` names `data`)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return set(GROUPS)  # composed by code, not by a command: take the config as it is
    return {re.split(r"[./@]", override_key(o))[0] for o in HydraConfig.get().overrides.task}


def use_checkpoint_run(cfg: DictConfig, ckpt_path: str) -> list[str]:
    """Replace ``cfg.model`` and ``cfg.data`` by those of the run that wrote ``ckpt_path``,
    where the command line names neither; return the groups replaced."""
    saved_path = Path(ckpt_path).resolve().parent.parent / "config.yaml"
    wanted = [g for g in GROUPS if g not in groups_on_command_line()]
    if not wanted or not saved_path.is_file():
        return []
    saved = OmegaConf.load(saved_path)
    if not isinstance(saved, DictConfig):
        return []
    taken = [g for g in wanted if isinstance(saved.get(g), DictConfig) and "_target_" in saved[g]]
    masked = [g for g in taken if MASK in OmegaConf.to_yaml(saved[g])]
    if masked:
        raise UserError(
            f"The run that wrote {ckpt_path} had a secret in its {masked[0]} config, masked in "
            f"{saved_path}. Pass the {' and '.join(masked)} options yourself "
            f"(e.g. `{masked[0]}=<name>`)."
        )
    with open_dict(cfg):
        for group in taken:
            cfg[group] = saved[group]
    if taken and is_rank_zero():
        print(
            f"{' and '.join(taken).capitalize()}: as the run that wrote the checkpoint trained "
            f"them ({saved_path}); name `{taken[0]}=...` to choose another."
        )
    return taken
