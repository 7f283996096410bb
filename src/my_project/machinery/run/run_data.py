"""`data.<key>=value` on eval.py, predict.py, serve.py and export.py sets that key of the data
of the run that wrote the checkpoint, not of the entry config's default data.

Those commands take the checkpoint run's data (`checkpoint_config.py`) unless the command line
chooses the group (`data=<name>`, `data._target_=...`). Hydra composes the default's data first
and would refuse a key the default lacks (or set one the run's data then drops): so before Hydra,
such a key is checked against the run's data (one it lacks is refused, with the closest ones) and
passed on as ``++data.<key>=value``; the job applies it to the run's data (:func:`apply`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ..config import config_dir
from ..errors import UserError
from ..reliability.resume import LAST, override_key
from ..reliability.secrets import MASK

GROUP = "data"
_ABSENT = object()


def chooses_the_group(overrides: Sequence[str], group: str = GROUP) -> bool:
    """Whether the overrides choose ``group`` (``data=<name>``, ``data._target_=...``, ``~data``)
    rather than set keys of it (``data.batch_size=8``)."""
    return any(
        override_key(o) in (group, f"{group}._target_") or override_key(o).startswith(f"{group}/")
        for o in overrides
    )


def saved_config_path(ckpt_path: str) -> Path:
    """The `config.yaml` of the run that wrote ``ckpt_path`` (beside its `checkpoints/`)."""
    return Path(ckpt_path).expanduser().resolve().parent.parent / "config.yaml"


def for_the_run_data(config_name: str, args: Sequence[str]) -> list[str]:
    """The command line, each ``data.<key>=value`` as ``++data.<key>=value`` once the checkpoint
    run's data is found to have that key, when the entry takes the run's data (its config
    requires ``ckpt_path`` and the command chooses no data); else ``args`` as they are."""
    args = list(args)
    typed = [a for a in args if override_key(a) == "ckpt_path" and "=" in a]
    if not typed or not _takes_a_checkpoint(config_name) or chooses_the_group(args):
        return args
    ckpt_path = typed[-1].split("=", 1)[1].strip("'\"")
    if ckpt_path in ("", LAST):
        return args
    saved_path = saved_config_path(ckpt_path)
    data = _saved_data(saved_path)
    if data is None:
        return args  # no run config to take the data from: the default's keys judge
    rewritten = []
    for arg in args:
        if "=" in arg and arg.startswith(f"{GROUP}."):
            key = override_key(arg)
            if OmegaConf.select(data, key[len(GROUP) + 1 :], default=_ABSENT) is _ABSENT:
                raise UserError(_unknown_key(arg, key, data, ckpt_path, saved_path))
            arg = f"++{arg}"
        rewritten.append(arg)
    return rewritten


def apply(cfg: DictConfig, overrides: Sequence[str], ckpt_path: str, saved_path: Path) -> list[str]:
    """Apply the command line's ``data.<key>`` overrides to ``cfg.data`` (the checkpoint run's),
    as Hydra applies them; the ones applied, as typed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    applied = []
    for text in overrides:
        if not override_key(text).startswith(f"{GROUP}."):
            continue
        override = parser.parse_overrides([text])[0]
        key, value = override.key_or_group, override.value()
        present = OmegaConf.select(cfg, key, default=_ABSENT) is not _ABSENT
        data = cfg[GROUP]
        with open_dict(cfg):
            if override.is_delete():
                if not present:
                    raise UserError(_unknown_key(text, key, data, ckpt_path, saved_path))
                parent, _, name = key.rpartition(".")
                del OmegaConf.select(cfg, parent)[name]
            elif override.is_force_add() or (override.is_add() and not present):
                OmegaConf.update(cfg, key, value, merge=True, force_add=True)
            elif override.is_add():
                raise UserError(
                    f"`{text}` adds `{key}`, which the data of the run that wrote {ckpt_path} "
                    f"({saved_path}) has already: set it without the `+` (`{text.lstrip('+')}`)."
                )
            elif present:
                OmegaConf.update(cfg, key, value, merge=True)
            else:
                raise UserError(_unknown_key(text, key, data, ckpt_path, saved_path))
        applied.append(text if override.is_delete() or override.is_add() else text.lstrip("+"))
    return applied


def _takes_a_checkpoint(config_name: str) -> bool:
    """Whether the entry config requires ``ckpt_path`` (eval, predict, serve, export)."""
    try:
        entry = OmegaConf.load(config_dir() / f"{config_name}.yaml")
    except Exception:  # no such file, unreadable YAML: Hydra says so
        return False
    return isinstance(entry, DictConfig) and OmegaConf.is_missing(entry, "ckpt_path")


def _saved_data(saved_path: Path) -> DictConfig | None:
    """The data config of a run's `config.yaml`, when it names a class and holds no masked
    secret (else the job says what is wrong with it, or the default's keys judge)."""
    try:
        saved = OmegaConf.load(saved_path) if saved_path.is_file() else None
    except Exception:  # yaml's errors: the job refuses the file, saying why
        return None
    data = saved.get(GROUP) if isinstance(saved, DictConfig) else None
    if not isinstance(data, DictConfig) or "_target_" not in data:
        return None
    return None if MASK in OmegaConf.to_yaml(data) else data


def _unknown_key(text: str, key: str, data: Any, ckpt_path: str, saved_path: Path) -> str:
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(data, parent[len(GROUP) + 1 :]) if "." in parent else data
    names = (
        [str(k) for k in node if not str(k).startswith("_")] if isinstance(node, DictConfig) else []
    )
    close = difflib.get_close_matches(name, names)
    hint = (
        f" Did you mean {' or '.join(f'`{parent}.{c}`' for c in close)}?"
        if close
        else f" Its keys: {', '.join(names)}."
        if names
        else ""
    )
    return (
        f"`{text}` cannot apply: the data of the run that wrote {ckpt_path} "
        f"({data.get('_target_', 'its data') if isinstance(data, DictConfig) else 'its data'}, "
        f"{saved_path}) has no `{key}`.{hint} Fix the key, or choose the data with "
        "`data=<name>`."
    )
