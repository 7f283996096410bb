"""eval.py and predict.py, given a checkpoint: the model and data of the run that wrote it.

`python eval.py ckpt_path=logs/train/runs/<run>/checkpoints/best.ckpt` should evaluate that
checkpoint as it was trained, whatever model and data it was trained with, without retyping
`model=... data=...` (a team's own module is not the entry config's default). The run's
resolved config is beside its checkpoints (`record.start` writes `config.yaml`); its `model`
and `data` replace the entry config's defaults, unless the command line names them.

The model itself is always rebuilt from the checkpoint's own hyperparameters, so a model
setting on the command line (``model/net=mlp`` for a CNN's checkpoint) cannot change it: one
that differs from the checkpoint's is refused in one line, rather than ignored while the
printed config shows it; the config that is printed and saved is the checkpoint's model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.resume import override_key
from ..reliability.secrets import MASK
from .hydra_errors import describe_yaml_error

GROUPS = ("model", "data")


def groups_on_command_line() -> set[str]:
    """The config groups the command line overrides (`data.batch_size=8` names `data`)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return set(GROUPS)  # composed by code, not by a command: take the config as it is
    return {re.split(r"[./@]", override_key(o))[0] for o in HydraConfig.get().overrides.task}


def use_checkpoint_run(cfg: DictConfig, ckpt_path: str) -> list[str]:
    """Replace ``cfg.model`` and ``cfg.data`` by those of the run that wrote ``ckpt_path``,
    where the command line names neither; return the groups replaced. Then the model's
    settings on the command line are checked against the checkpoint's
    (:func:`use_checkpoint_model`)."""
    taken = _take_run_config(cfg, ckpt_path)
    use_checkpoint_model(cfg, ckpt_path)
    return taken


def _take_run_config(cfg: DictConfig, ckpt_path: str) -> list[str]:
    saved_path = Path(ckpt_path).resolve().parent.parent / "config.yaml"
    wanted = [g for g in GROUPS if g not in groups_on_command_line()]
    if not wanted or not saved_path.is_file():
        return []
    try:
        saved = OmegaConf.load(saved_path)
    except Exception as error:  # yaml's ParserError, ScannerError; a file that is not text
        problem = (
            describe_yaml_error(error, saved_path).split(". Fix")[0]
            if hasattr(error, "problem_mark")
            else f"{saved_path} cannot be read ({type(error).__name__})"
        )
        raise UserError(
            f"{problem}. It is the config of the run that wrote {ckpt_path}, read for the model "
            f"and data to use: fix or remove it, or name them yourself (`model=<name> "
            "data=<name>`)."
        ) from error
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


def typed_model_overrides() -> list[str]:
    """The command line's overrides of the model's settings (`model.lr=...`, `model/net=mlp`;
    not `model=<name>` nor `model._target_=...`, which pick the class the checkpoint is loaded
    into: a subclass with its own `predict_step`, say)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [
        o
        for o in HydraConfig.get().overrides.task
        if re.match(r"[+~]*model[./]", o.lstrip()) and override_key(o) != "model._target_"
    ]


def use_checkpoint_model(cfg: DictConfig, ckpt_path: str) -> None:
    """Model settings on the command line that differ from the checkpoint's hyperparameters
    are a UserError; ``cfg.model`` then becomes the checkpoint's model (what is evaluated, as
    the printed config and the loggers show it)."""
    from ..preflight.checkpoint import read_checkpoint

    recorded = read_checkpoint(ckpt_path).get("hyper_parameters")
    if not isinstance(recorded, dict):
        return
    script = cfg.get("task_name", "eval")
    for override in typed_model_overrides():
        key = override_key(override).replace("/", ".")
        wanted = _plain(OmegaConf.select(cfg, key, default=None))
        found, saved = _lookup(recorded, key.split(".")[1:])
        if found and _same(wanted, saved):
            continue
        what = f"`{key[len('model.') :]}` is {_show(saved)}" if found else "it has no such setting"
        raise UserError(
            f"`{override}` cannot apply: {script}.py rebuilds the model from the checkpoint's "
            f"own hyperparameters ({ckpt_path}), where {what}. Drop `{override}` to use the "
            "checkpoint's model as trained, or pass a checkpoint of a model trained with it."
        )
    target = OmegaConf.select(cfg, "model._target_", default=None)
    try:
        model = OmegaConf.create({"_target_": target, **recorded})
    except Exception:  # hyperparameters a config cannot hold (objects): keep the config
        return
    with open_dict(cfg):
        cfg.model = model


def _lookup(mapping: Any, path: list[str]) -> tuple[bool, Any]:
    current = mapping
    for part in path:
        if not isinstance(current, dict) or part not in current:
            return False, None
        current = current[part]
    return True, current


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _show(value: Any) -> str:
    if isinstance(value, dict):
        target = value.get("_target_")
        return f"{target} ({', '.join(f'{k}={v}' for k, v in value.items() if k != '_target_')})"
    return str(value)
