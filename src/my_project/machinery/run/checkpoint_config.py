"""eval.py, predict.py, serve.py and export.py, given a checkpoint, take the `model` and `data`
of the run that wrote it (its `config.yaml`, beside `checkpoints/`) unless the command line
names them. The model is rebuilt from the checkpoint's own hyperparameters, so a model setting
on the command line that differs from them is refused rather than silently ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.resume import override_key
from ..reliability.secrets import MASK
from .hydra_errors import describe_yaml_error

GROUPS = ("model", "data")


def command_line() -> list[str] | None:
    """The command line's overrides; None for a config composed by code."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else None


def use_checkpoint_run(cfg: DictConfig, ckpt_path: str) -> list[str]:
    """Replace ``cfg.model`` and ``cfg.data`` by those of the run that wrote ``ckpt_path``,
    where the command line names neither; check the model settings on the command line
    against the checkpoint's hyperparameters. Returns the groups replaced."""
    overrides = command_line()
    named = {re.split(r"[./@]", override_key(o))[0] for o in overrides or []}
    wanted = [] if overrides is None else [group for group in GROUPS if group not in named]
    saved_path = Path(ckpt_path).resolve().parent.parent / "config.yaml"
    taken: list[str] = []
    if wanted and saved_path.is_file():
        taken = _take(cfg, ckpt_path, saved_path, wanted)
    use_checkpoint_model(cfg, ckpt_path, overrides or [])
    return taken


def _take(cfg: DictConfig, ckpt_path: str, saved_path: Path, wanted: list[str]) -> list[str]:
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
            "and data to use: fix or remove it, or name them yourself (`model=<name> "
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


def use_checkpoint_model(cfg: DictConfig, ckpt_path: str, overrides: list[str]) -> None:
    """Model settings among ``overrides`` (`model.lr=...`, `model/net=mlp`; not `model=<name>`
    nor `model._target_=...`, which pick the class the checkpoint is loaded into) that differ
    from the checkpoint's hyperparameters are a UserError; ``cfg.model`` then becomes the
    checkpoint's model (what runs, as the printed config and the loggers show it)."""
    from ..preflight.checkpoint import read_checkpoint

    recorded = read_checkpoint(ckpt_path).get("hyper_parameters")
    if not isinstance(recorded, dict):
        return
    script = cfg.get("task_name", "eval")
    for override in overrides:
        key = override_key(override).replace("/", ".")
        if not re.match(r"[+~]*model[./]", override.lstrip()) or key == "model._target_":
            continue
        wanted = OmegaConf.select(cfg, key, default=None)
        if OmegaConf.is_config(wanted):
            wanted = OmegaConf.to_container(wanted, resolve=True)
        found, saved = True, cast(Any, recorded)
        for part in key.split(".")[1:]:
            found = isinstance(saved, dict) and part in saved
            saved = saved[part] if found else None
            if not found:
                break
        if found and _same(wanted, saved):
            continue
        what = f"`{key[len('model.') :]}` is {_show(saved)}" if found else "it has no such setting"
        raise UserError(
            f"`{override}` cannot apply: {script}.py rebuilds the model from the checkpoint's "
            f"own hyperparameters ({ckpt_path}), where {what}. Drop `{override}` to use the "
            "checkpoint's model as trained, or pass a checkpoint of a model trained with it."
        )
    try:
        model = OmegaConf.create({"_target_": cfg.model.get("_target_"), **recorded})
    except Exception:  # hyperparameters a config cannot hold (objects): keep the config
        return
    with open_dict(cfg):
        cfg.model = model


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
