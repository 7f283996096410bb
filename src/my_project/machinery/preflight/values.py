"""Config values nothing refuses before the run is written, checked before anything is built.

What an object refuses when it is built is its own to say (`run/boundary.py`). Here is what is
taken as it is and fails later, or never: a value of the wrong type for its parameter's
annotation (the Trainer takes ``max_epochs="abc"``); by key name, a `lr`, `batch_size`... out of
range; a folder that is empty; a group file that is not `_global_`.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    check_config_types(resolved, cfg)
    if errors := named_value_errors(resolved):
        raise UserError(
            f"Bad value in the config: {'; '.join(errors)}. Fix it on the command line or in "
            "configs/."
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
    """The type annotations of a ``_target_``'s parameters (none if it cannot be imported)."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
        return typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
    except Exception:
        return {}


def _plain_types(annotation: Any) -> tuple[Any, ...]:
    """The plain types an annotation allows (``int | None``: int, NoneType); () when it allows
    anything else too (a class, Any): the object's to check."""
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


_INTERPOLATED = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)(?:,[^}]*)?\}")  # ${seed}


def _verb(takers: list[str]) -> str:
    return "takes" if len(takers) == 1 else "take"


def check_config_types(
    config: Mapping[str, Any] | DictConfig, composed: DictConfig | None = None
) -> None:
    """Every value under a ``_target_`` against the type annotation of its parameter, a wrong
    one named by the key typed (``composed``, unresolved: `seed` where a setting is ${seed})."""
    composed = config if isinstance(config, DictConfig) else composed
    unresolved = OmegaConf.to_container(composed) if composed is not None else {}
    raw = {where: value for where, _, value in _walk(unresolved)}
    config = check_config_resolves(config) if isinstance(config, DictConfig) else config
    errors: dict[str, str] = {}  # by the key typed: `seed=abc` reaches settings as ${seed}
    takers: dict[str, list[str]] = {}
    for where, _, node in [("", "", config), *_walk(config)]:
        if not isinstance(node, Mapping) or not isinstance(node.get("_target_"), str):
            continue
        for key, value in node.items():
            plain = _plain_types(_hints(node["_target_"]).get(key))
            built = isinstance(value, Mapping) and "_target_" in value  # Hydra builds it
            if plain and not built and not any(_is(value, t) for t in plain):
                expected = " or ".join(dict.fromkeys(_PLAIN[t] for t in plain))
                path = f"{where}.{key}".lstrip(".")
                typed = _INTERPOLATED.fullmatch(str(raw.get(path, "")))
                source = typed.group(1) if typed else path
                wrong = f"`{source}={value!r}` must be {expected}, not {type(value).__name__}"
                if typed:
                    takers.setdefault(source, []).append(path)
                    errors.setdefault(source, wrong)
                else:  # the key typed is checked itself: its own type is the one to name
                    errors[source] = wrong
    if errors:
        said = [
            message
            + (f" ({', '.join(takers[key])} {_verb(takers[key])} it)" if key in takers else "")
            for key, message in errors.items()
        ]
        raise UserError(
            f"Wrong type in the config: {'; '.join(said)}. Fix it on the command line or in "
            "configs/."
        )


def check_trainer_types(trainer: DictConfig) -> None:
    """The `trainer` config's plain values against `lightning.Trainer`'s annotations (`doctor`,
    outside a Hydra run, where ``${...}`` may not resolve)."""
    values = OmegaConf.to_container(trainer)
    assert isinstance(values, dict)
    check_config_types({"trainer": {k: v for k, v in values.items() if "${" not in str(v)}})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _at_least(least: int, whole: bool = True) -> Callable[[Any], bool]:
    return lambda v: v >= least and (isinstance(v, int) or not whole)


# By key name, anywhere in the config: (name, what is allowed, the test of a number). The Trainer
# takes these as they are and fails inside its loop; an optimizer is built once training starts.
_AT_LEAST_ONE = "(.+_)?batch_size|log_every_n_steps|accumulate_grad_batches|check_val_every_n_epoch"
_RATES = "(.+_)?(lr|learning_rate)|weight_decay|gradient_clip_val"
_RULES: list[tuple[str, str, Callable[[Any], bool]]] = [
    (_AT_LEAST_ONE, "a whole number >= 1", _at_least(1)),
    ("num_workers|min_epochs|min_steps", "a whole number >= 0", _at_least(0)),
    ("num_sanity_val_steps", "a whole number >= 0, or -1 for all", _at_least(-1)),
    (_RATES, "a finite number >= 0", _at_least(0, whole=False)),
    ("(.+_)?fraction", "a fraction in [0.0, 1.0]", lambda v: 0 <= v <= 1),
    ("val_check_interval", "a fraction of an epoch or a number of batches > 0", lambda v: v > 0),
]
_FOLDER = "dir|dirpath|.+_dir"  # empty: the current directory (an environment variable set empty?)


def named_value_errors(config: Any) -> list[str]:
    """Values of `batch_size`, `lr`, `num_workers`, `*_fraction`... keys anywhere in ``config``
    out of range or not finite (inf passes `>= 0`; the run would end in NaNs); empty folders."""
    errors = [
        f"`{where}=` is empty: name a folder"
        for where, key, value in _walk(config)
        if re.fullmatch(_FOLDER, key) and isinstance(value, str) and not value.strip()
    ]
    return errors + [
        f"`{where}={value!r}` must be {allowed}"
        for where, key, value in _walk(config)
        for name, allowed, valid in _RULES
        if re.fullmatch(name, key.lower())
        and _number(value)
        and not (math.isfinite(value) and valid(value))
    ]
