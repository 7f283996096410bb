"""Config values no object checks when it is built, checked before any is.

What the objects refuse themselves (the Trainer's ``max_epochs=-5``, ``num_nodes=0``, torch's
layer sizes) is theirs to say (`run/boundary.py`). Here: a value of the wrong type for the
parameter it goes to (by its annotation, for any class), and by key name in any config (the
team's too) a `batch_size`, `lr`, `num_workers`, `*_fraction`, `*dropout` out of range or not
finite, a folder that is empty or a file; the Trainer arguments Lightning takes as they are and
fails on inside its loop; settings nothing would read.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ..config import config_dir
from ..errors import UserError


def check_config_resolves(cfg: DictConfig) -> dict[str, Any]:
    """Every ``${...}`` of the config resolves (a model's ``${data.num_features}`` with data that
    has no such key); return the resolved config, which the other checks read."""
    from omegaconf.errors import InterpolationKeyError, InterpolationResolutionError

    try:
        return typing.cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    except InterpolationResolutionError as error:
        cause: BaseException | None = error
        while cause is not None:  # a resolver of ours that refused its input says why
            if isinstance(cause, UserError):
                raise cause from None
            cause = cause.__cause__
        key = getattr(error, "full_key", None) or "a value"
        problem = str(getattr(error, "msg", None) or error).splitlines()[0]
        advice = f"Fix what it names, or set `{key}=...` yourself."
        if isinstance(error, InterpolationKeyError):
            advice = (
                "A value refers to a key this composition of configs does not have (often a "
                "model config taking a size from data that does not define it). Add the key to "
                f"the config it names, pick configs that have it, or set `{key}=...` yourself."
            )
        raise UserError(f"{key} cannot be resolved: {problem}. {advice}") from error


def check_values(cfg: DictConfig, resolved: Mapping[str, Any]) -> None:
    """Every check of this module, on the composed config and its resolved values."""
    check_global_groups(cfg)
    check_group_entries(resolved)
    check_config_types(resolved)
    errors = trainer_range_errors(resolved.get("trainer") or {})
    errors += named_value_errors({k: v for k, v in resolved.items() if k != "trainer"})
    errors += folder_errors(resolved)
    if errors:
        raise UserError(
            f"Value out of range in the config: {'; '.join(errors)}. Fix the override on the "
            "command line or the value in configs/."
        )


def check_global_groups(cfg: DictConfig) -> None:
    """A file of a group whose files set top-level keys (``experiment``, ``debug``) without
    ``# @package _global_``: Hydra puts its keys under the group's name, where nothing reads
    them, and the run would silently do something other than the file asks."""
    for key in map(str, cfg):
        files = sorted((config_dir() / key).glob("*.yaml"))
        global_ = re.compile(r"^#\s*@package\s+_global_", re.MULTILINE)
        if not files or not all(global_.search(f.read_text()) for f in files):
            continue
        node = cfg[key]
        keys = ", ".join(f"{key}.{k!s}" for k in node) if isinstance(node, DictConfig) else key
        raise UserError(
            f"The `{key}` config you chose has no `# @package _global_` first line, so Hydra put "
            f"its values under `{key}.` ({keys}), where nothing reads them: the run would "
            f"ignore them. Add `# @package _global_` as the file's first line, as in "
            f"configs/{key}/{files[0].name}."
        )


def check_group_entries(resolved: Mapping[str, Any]) -> None:
    """An entry of ``logger`` or ``callbacks`` with settings but no ``_target_`` (set for a
    logger the chosen group does not include: ``+logger.wandb.project=x`` with ``logger=csv``):
    nothing builds it, and the run would go on without it."""
    for group, how in (("logger", "logger=[csv,{}]"), ("callbacks", "callbacks=[default,{}]")):
        node = resolved.get(group) or {}
        for name, entry in node.items():
            if isinstance(entry, Mapping) and "_target_" not in entry:
                settings = ", ".join(f"{group}.{name}.{key}" for key in entry)
                chosen = ", ".join(str(k) for k, v in node.items() if v and "_target_" in v)
                raise UserError(
                    f"`{group}.{name}` has settings ({settings}) but nothing to build: the "
                    f"{group} chosen ({chosen or 'none'}) does not include `{name}`, so the run "
                    f"would go on without it. Choose it first, e.g. `{how.format(name)}`, then "
                    f"set `{group}.{name}.<key>=...`."
                )


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key path, key, value) of everything under ``node`` (list items have the key "")."""
    if isinstance(node, list):
        for i, value in enumerate(node):
            yield f"{path}[{i}]", "", value
            yield from _walk(value, f"{path}[{i}]")
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield f"{path}.{key}".lstrip("."), str(key), value
            yield from _walk(value, f"{path}.{key}".lstrip("."))


# -- types: each value under a `_target_` against the annotation of the parameter it goes to --
_PLAIN = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_PLAIN |= {type(None): "null", list: "a list", tuple: "a list", Sequence: "a list"}
_PLAIN |= {dict: "a mapping", Mapping: "a mapping"}


def _plain_types(annotation: Any) -> tuple[Any, ...]:
    """The plain types an annotation allows (``int | None``: int, NoneType); () when it allows
    anything else too (a class, a Literal, Any), which is for the object to check."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    arms = tuple(
        typing.get_origin(a) or a for a in (typing.get_args(annotation) if union else [annotation])
    )
    return arms if all(arm in _PLAIN for arm in arms) else ()


def _is(value: Any, plain: Any) -> bool:
    if plain in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    if plain is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, plain) and (plain is bool or not isinstance(value, bool))


def _annotations(target: Any) -> dict[str, Any]:
    """The annotated parameters of a ``_target_`` (none if it cannot be inspected)."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
        function = obj.__init__ if inspect.isclass(obj) else obj
        hints = typing.get_type_hints(function)
        return {n: hints[n] for n in inspect.signature(function).parameters if n in hints}
    except Exception:  # an unimportable target: building it is refused with Hydra's message
        return {}


def check_config_types(config: Mapping[str, Any] | DictConfig) -> None:
    """Every value under a ``_target_`` against the type annotation of its parameter."""
    if isinstance(config, DictConfig):
        config = check_config_resolves(config)
    nodes: list[tuple[str, Mapping[str, Any]]] = [("", config)]
    nodes += [(w, v) for w, _, v in _walk(config) if isinstance(v, Mapping)]
    errors = []
    for where, node in nodes:
        hints = _annotations(node["_target_"]) if isinstance(node.get("_target_"), str) else {}
        for key, value in node.items():
            plain = _plain_types(hints.get(key))
            built = isinstance(value, Mapping) and "_target_" in value  # Hydra builds it
            if plain and not built and not any(_is(value, t) for t in plain):
                expected = " or ".join(dict.fromkeys(_PLAIN[t] for t in plain))
                where_ = f"{where}.{key}".lstrip(".")
                errors.append(
                    f"`{where_}={value!r}` must be {expected}, not {type(value).__name__}"
                )
    seed = config.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        errors.insert(0, f"`seed={seed!r}` must be an integer or null")
    if errors:
        raise UserError(
            f"Wrong type in the config: {'; '.join(errors)}. Fix the override on the command "
            "line (e.g. `data.batch_size=64`, `model.lr=0.001`) or the value in configs/."
        )


def check_trainer_types(trainer: DictConfig) -> None:
    """The `trainer` config's values against `lightning.Trainer`'s annotations (those that
    resolve: `doctor` asks outside a Hydra run, where `${hydra:...}` does not)."""
    values = {}
    for key in map(str, trainer):
        with contextlib.suppress(Exception):
            value = trainer[key]
            plain = isinstance(value, (DictConfig, ListConfig))
            values[key] = OmegaConf.to_container(value, resolve=True) if plain else value
    check_config_types({"trainer": values})


# -- ranges -----------------------------------------------------------------------------------
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


def trainer_range_errors(trainer: Mapping[str, Any]) -> list[str]:
    return [
        f"`trainer.{field}={trainer[field]!r}` must be {allowed}"
        for field, (allowed, valid) in _TRAINER_RANGES.items()
        if _number(trainer.get(field)) and not valid(trainer[field])
    ]


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
    that are out of range; and fractions of one mapping that add up to more than 1."""
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
    """Folders (`*_dir`, `dir`, `dirpath` keys, any config) given as an empty string (what is
    written there would land in the current directory, or at the filesystem's root below it),
    or under a file: the code that writes or downloads there would fail deep inside."""
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
