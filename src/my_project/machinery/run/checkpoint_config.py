"""eval.py, predict.py, serve.py and export.py take the `model` and `data` of the run that
wrote the checkpoint (its `config.yaml`) unless the command line chooses them (`data=<name>`).
The model is rebuilt from the checkpoint's hyperparameters: a model setting on the command line
is refused; a data setting (`data.batch_size=8`) sets that key of the run's data (`run_data.py`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.resume import override_key
from ..reliability.secrets import MASK
from . import run_data
from .hydra_errors import describe_yaml_error


def checkpoint_run(cfg: DictConfig) -> tuple[str, dict[str, Any], Any]:
    """predict.py's, serve.py's and export.py's first steps: check, take the checkpoint run's model
    and data, load its model; the checkpoint, the config to record, the model (eval mode)."""
    from .. import preflight
    from . import build, entry

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)
    config = build.masked_config(cfg)
    return ckpt_path, config, build.load_model(cfg.model._target_, ckpt_path).eval()


def use_checkpoint_run(cfg: DictConfig, ckpt_path: str) -> None:
    """Refuse model settings on the command line; replace ``cfg.model`` and ``cfg.data`` by
    those of the run that wrote ``ckpt_path`` where the command line chooses neither, the data
    with the command line's ``data.<key>`` settings (a config composed by code names what it
    wants)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    overrides = list(HydraConfig.get().overrides.task)
    for override in overrides:  # `model=<name>` and `model._target_=` pick the class to load
        if re.match(r"model[./]", override_key(override)) and "model._target_=" not in override:
            raise UserError(
                f"`{override}` cannot apply: {cfg.get('task_name', 'eval')}.py rebuilds the model "
                f"from the checkpoint's own hyperparameters ({ckpt_path}). Drop it to use the "
                "checkpoint's model as trained, or pass a checkpoint of a model trained with it."
            )
    named = {re.split(r"[./@]", override_key(o))[0] for o in overrides} - {run_data.GROUP}
    named |= {run_data.GROUP} if run_data.chooses_the_group(overrides) else set()
    wanted = [group for group in ("model", "data") if group not in named]
    saved_path = run_data.saved_config_path(ckpt_path)
    if not saved_path.is_file() or not (wanted or "callbacks" not in named):
        return
    try:
        saved = OmegaConf.load(saved_path)
    except Exception as error:  # yaml's ParserError, ScannerError; a file that is not text
        problem = describe_yaml_error(error, saved_path).split(". Fix")[0]
        raise UserError(
            f"{problem}. It is the config of the run that wrote {ckpt_path}, read for the model "
            "and data to use: fix or remove it, or name them (`model=<name> data=<name>`)."
        ) from error
    given: Any = saved if isinstance(saved, DictConfig) else {}
    taken = [g for g in wanted if isinstance(given.get(g), DictConfig) and "_target_" in given[g]]
    masked = [g for g in taken if MASK in OmegaConf.to_yaml(given[g])]
    if masked:
        raise UserError(
            f"The run that wrote {ckpt_path} had a secret in its {masked[0]} config, masked in "
            f"{saved_path}. Pass the {' and '.join(masked)} options yourself (`{masked[0]}=...`)."
        )
    with open_dict(cfg):
        for group in taken:
            cfg[group] = given[group]
    changed = run_data.apply(cfg, overrides, ckpt_path, saved_path) if "data" in taken else []
    if "callbacks" not in named:
        keep_device_guard_choice(cfg, given, saved_path)
    if taken and is_rank_zero():
        with_changes = f", with {' '.join(changed)}" if changed else ""
        print(
            f"{' and '.join(taken).capitalize()}: as the run that wrote the checkpoint trained "
            f"them ({saved_path}){with_changes}; name `{taken[-1]}=...` to choose another."
        )


def keep_device_guard_choice(cfg: DictConfig, saved: Any, saved_path: Path) -> None:
    """A run trained with `~callbacks.device_guard` is evaluated without it too."""
    callbacks = saved.get("callbacks") if isinstance(saved, DictConfig) else None
    if not isinstance(callbacks, DictConfig) or "device_guard" in callbacks:
        return
    if "device_guard" in (cfg.get("callbacks") or {}):
        with open_dict(cfg):
            del cfg.callbacks["device_guard"]
        if is_rank_zero():
            print(
                f"Callbacks: without device_guard, as the run that wrote the checkpoint trained "
                f"({saved_path}); name `'callbacks=[device_guard,whole_metrics]'` to use it."
            )
