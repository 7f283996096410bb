"""Config values nothing refuses before the run is written, checked before anything is built.

What an object refuses when it is built (the Trainer's ``max_epochs=-5``, a DataLoader's
``batch_size=0``) is its own to say (`run/boundary.py`). Here is what is taken as it is and fails
later, inside the loop, or never: a value of the wrong type for the parameter it goes to, by its
annotation (the Trainer takes ``max_epochs="abc"``); by key name in any config, a `lr`,
`batch_size`, `num_workers`, `*_fraction` or `*dropout` out of range (an optimizer is built only
once training starts); a folder that is empty or a file; a group file that is not `_global_`.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import config_dir
from ..errors import UserError, user_error_in


def check_config_resolves(cfg: DictConfig) -> dict[str, Any]:
    """Every ``${...}`` resolves (a model's ``${data.num_features}`` with data that has no such
    key); return the resolved config, which the other checks read."""
    from omegaconf.errors import InterpolationResolutionError

    try:
        return typing.cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    except InterpolationResolutionError as error:
        key = getattr(error, "full_key", None) or "a value"
        problem = str(getattr(error, "msg", None) or error).splitlines()[0]
        raise user_error_in(error) or UserError(
            f"{key} cannot be resolved: {problem}. Add the key it names to the config that lacks "
            f"it, pick configs that have it, or set `{key}=...` yourself."
        ) from error


def check_values(cfg: DictConfig, resolved: Mapping[str, Any]) -> None:
    """Every check of this module, on the composed config and its resolved values."""
    global_ = re.compile(r"^#\s*@package\s+_global_", re.MULTILINE)
    for key in map(str, cfg):  # a group whose files set top-level keys (experiment, debug)
        files = sorted((config_dir() / key).glob("*.yaml"))
        if files and all(global_.search(f.read_text()) for f in files):
            raise UserError(
                f"The `{key}` config you chose has no `# @package _global_` first line, so Hydra "
                f"put its values under `{key}.`, where nothing reads them: the run would ignore "
                f"them. Add it as the file's first line, as in configs/{key}/{files[0].name}."
            )
    check_config_types(resolved)
    errors = [
        f"`trainer.{key}={value!r}` must be {allowed}"
        for key, (allowed, valid) in _TRAINER_RANGES.items()
        if _number(value := (resolved.get("trainer") or {}).get(key)) and not valid(value)
    ]
    errors += named_value_errors({k: v for k, v in resolved.items() if k != "trainer"})
    errors += folder_errors(resolved)
    if errors:
        raise UserError(
            f"Value out of range in the config: {'; '.join(errors)}. Fix the override on the "
            "command line or the value in configs/."
        )


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key path, key, value) of everything under ``node`` (list items have the key "")."""
    if isinstance(node, list):
        items = [(f"{path}[{i}]", "", value) for i, value in enumerate(node)]
    elif isinstance(node, Mapping):
        items = [(f"{path}.{key}".lstrip("."), str(key), value) for key, value in node.items()]
    else:
        return
    for where, key, value in items:
        yield where, key, value
        yield from _walk(value, where)


_PLAIN = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_PLAIN |= {type(None): "null", list: "a list", tuple: "a list", Sequence: "a list"}
_PLAIN |= {dict: "a mapping", Mapping: "a mapping"}


@functools.cache
def _hints(target: str) -> dict[str, Any]:
    """The type annotations of a ``_target_``'s parameters (none if it cannot be inspected:
    an unimportable target is refused when it is built)."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
        return typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
    except Exception:
        return {}


def _plain_types(annotation: Any) -> tuple[Any, ...]:
    """The plain types an annotation allows (``int | None``: int, NoneType); () when it allows
    anything else too (a class, a Literal, Any), which is for the object to check."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    arms = [
        typing.get_origin(a) or a for a in (typing.get_args(annotation) if union else [annotation])
    ]
    return tuple(arms) if all(arm in _PLAIN for arm in arms) else ()


def _is(value: Any, plain: Any) -> bool:
    if plain in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    if plain is float:
        return _number(value)
    return isinstance(value, plain) and (plain is bool or not isinstance(value, bool))


def check_config_types(config: Mapping[str, Any] | DictConfig) -> None:
    """Every value under a ``_target_`` against the type annotation of its parameter."""
    config = check_config_resolves(config) if isinstance(config, DictConfig) else config
    errors = []
    for where, _, node in [("", "", config), *_walk(config)]:
        if not isinstance(node, Mapping) or not isinstance(node.get("_target_"), str):
            continue
        for key, value in node.items():
            plain = _plain_types(_hints(node["_target_"]).get(key))
            built = isinstance(value, Mapping) and "_target_" in value  # Hydra builds it
            if plain and not built and not any(_is(value, t) for t in plain):
                expected = " or ".join(dict.fromkeys(_PLAIN[t] for t in plain))
                shown = f"{where}.{key}={value!r}".lstrip(".")
                errors.append(f"`{shown}` must be {expected}, not {type(value).__name__}")
    if (seed := config.get("seed")) is not None and not _is(seed, int):
        errors.insert(0, f"`seed={seed!r}` must be an integer or null")
    if errors:
        raise UserError(
            f"Wrong type in the config: {'; '.join(errors)}. Fix the override on the command "
            "line (e.g. `data.batch_size=64`, `model.lr=0.001`) or the value in configs/."
        )


def check_trainer_types(trainer: DictConfig) -> None:
    """The `trainer` config's plain values against `lightning.Trainer`'s annotations (`doctor`,
    outside a Hydra run, where ``${...}`` may not resolve)."""
    values = OmegaConf.to_container(trainer)
    assert isinstance(values, dict)
    check_config_types({"trainer": {k: v for k, v in values.items() if "${" not in str(v)}})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Trainer arguments Lightning takes as they are and fails on inside its loop.
_TRAINER_RANGES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "min_epochs": ("a whole number >= 0", lambda v: v >= 0),
    "min_steps": ("a whole number >= 0", lambda v: v >= 0),
    "log_every_n_steps": ("a whole number >= 1", lambda v: v >= 1),
    "accumulate_grad_batches": ("a whole number >= 1", lambda v: v >= 1),
    "check_val_every_n_epoch": ("a whole number >= 1", lambda v: v >= 1),
    "num_sanity_val_steps": ("a whole number >= 0, or -1 for all", lambda v: v >= -1),
    "gradient_clip_val": ("a number >= 0", lambda v: v >= 0),
    "val_check_interval": ("a fraction of an epoch or a number of batches > 0", lambda v: v > 0),
}


def _rule_for(key: str) -> tuple[str, Callable[[Any], bool], bool] | None:
    """(what is allowed, the test, whole numbers only) for a key name; None: no rule."""
    name = key.lower()
    if name == "batch_size" or name.endswith("_batch_size"):
        return "a whole number >= 1", lambda v: v >= 1, True
    if name == "num_workers":
        return "a whole number >= 0 (0 loads in the main process)", lambda v: v >= 0, True
    if name in ("lr", "learning_rate", "weight_decay") or name.endswith(("_lr", "_learning_rate")):
        return "a number >= 0", lambda v: v >= 0, False
    if name == "fraction" or name.endswith("_fraction"):
        return "a fraction in [0.0, 1.0]", lambda v: 0 <= v <= 1, False
    if name == "dropout" or name.endswith("_dropout"):
        return "a probability in [0.0, 1.0)", lambda v: 0 <= v < 1, False
    return None


def named_value_errors(config: Any) -> list[str]:
    """Values of `batch_size`, `lr`, `num_workers`, `*_fraction`... keys anywhere in ``config``
    out of range or not finite; and fractions of one mapping adding up to more than 1."""
    errors: list[str] = []
    fractions: dict[str, dict[str, float]] = {}
    for where, key, value in _walk(config):
        if (rule := _rule_for(key)) is None or not _number(value):
            continue
        allowed, valid, whole = rule
        if not math.isfinite(value):  # inf passes `>= 0`; the run would end in NaNs
            errors.append(f"`{where}={value!r}` must be a finite number ({allowed})")
        elif (whole and not isinstance(value, int)) or not valid(value):
            errors.append(f"`{where}={value!r}` must be {allowed}")
        elif allowed.startswith("a fraction"):
            fractions.setdefault(where.rpartition(".")[0], {})[where] = value
    for found in fractions.values():
        if len(found) > 1 and sum(found.values()) > 1:
            listed = " + ".join(f"`{k}={v!r}`" for k, v in found.items())
            errors.append(f"{listed} add up to more than 1, leaving nothing for the rest")
    return errors


def folder_errors(config: Mapping[str, Any]) -> list[str]:
    """Folders (`*_dir`, `dir`, `dirpath` keys) given empty (the current directory, or the
    root below it) or under a file (what writes or downloads there would fail deep inside)."""
    errors = []
    for where, key, value in _walk(config):
        if not (key in ("dir", "dirpath") or key.endswith("_dir")) or not isinstance(value, str):
            continue
        if not value.strip():
            empty = sorted(v for v, text in os.environ.items() if v.endswith("_DIR") and not text)
            cause = f", as {', '.join(empty)} is set but empty" if empty else ""
            errors.append(f"`{where}=` is empty{cause}: give it a folder, or unset it")
        elif file := next((p for p in (Path(value), *Path(value).parents) if p.is_file()), None):
            errors.append(f"`{where}={value}` must be a folder, but {file} is a file")
    return errors
