"""Config values of the wrong type, checked before any object is built.

Without these, a wrong type fails deep inside torch (``'<=' not supported between 'float' and
'str'``) or deep inside Lightning's loop. Every value under a ``_target_`` is checked against
the type annotation of the parameter it goes to, for any class (the team's too).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError

# Trainer arguments that must be whole numbers, and those that may be a number of batches
# (int) or a fraction (float). Lightning itself only fails deep inside the loop on these.
_INT_FIELDS = (
    "max_epochs",
    "min_epochs",
    "max_steps",
    "min_steps",
    "num_nodes",
    "log_every_n_steps",
    "accumulate_grad_batches",
    "check_val_every_n_epoch",
    "num_sanity_val_steps",
)
_NUMBER_FIELDS = (
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
    "val_check_interval",
    "overfit_batches",
    "gradient_clip_val",
)


def check_trainer_types(trainer: DictConfig) -> None:
    for field in _INT_FIELDS:
        value = trainer.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(
                f"trainer.{field}={value!r} must be a whole number, not {type(value).__name__}. "
                f"Use for example `trainer.{field}=10`."
            )
    for field in _NUMBER_FIELDS:
        value = trainer.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(
                f"trainer.{field}={value!r} must be a number (an int counts batches, a float in "
                f"[0, 1] a fraction), not {type(value).__name__}. Use for example `trainer.{field}=0.5`."
            )


_SIMPLE = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _matches(value: Any, annotation: Any) -> bool | None:
    """True/False when the annotation says; None when it is beyond plain config types."""
    if annotation in (inspect.Parameter.empty, Any):
        return None
    if isinstance(value, Mapping) and "_target_" in value:
        return None  # instantiated by Hydra into whatever the target builds
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        results = [_matches(value, arm) for arm in args]
        return True if True in results else (None if None in results else False)
    if origin is typing.Literal:
        return value in args
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    container = origin or annotation
    if container in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    if container in (dict, Mapping):
        return isinstance(value, Mapping)
    return None


def _describe(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if annotation is type(None):
        return "null"
    if (origin or annotation) in (list, tuple, Sequence):
        return "a list"
    return _SIMPLE.get(annotation, "a mapping")


def _parameters(target: str) -> dict[str, Any] | None:
    """The annotated parameters of a ``_target_``; None if it cannot be inspected."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
        function = obj.__init__ if inspect.isclass(obj) else obj
        hints = typing.get_type_hints(function)
        names = inspect.signature(function).parameters
    except Exception:  # an unimportable target fails later with Hydra's own message
        return None
    return {name: hints[name] for name in names if name in hints}


def _type_errors(node: Any, path: str) -> list[str]:
    errors: list[str] = []
    if isinstance(node, Mapping):
        params = _parameters(node["_target_"]) if isinstance(node.get("_target_"), str) else None
        for key, value in node.items():
            if str(key).startswith("_"):
                continue
            where = f"{path}.{key}" if path else str(key)
            if params is not None and key in params and _matches(value, params[key]) is False:
                errors.append(
                    f"`{where}={value!r}` must be {_describe(params[key])}, "
                    f"not {type(value).__name__}"
                )
            errors.extend(_type_errors(value, where))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            errors.extend(_type_errors(item, f"{path}[{i}]"))
    return errors


def check_config_types(cfg: DictConfig) -> None:
    """Every value under a ``_target_`` against the type annotation of its parameter."""
    container = OmegaConf.to_container(cfg, resolve=True)
    errors = _type_errors(container, "")
    seed = cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        errors.insert(0, f"`seed={seed!r}` must be an integer or null")
    if errors:
        raise UserError(
            f"Wrong type in the config: {'; '.join(errors)}. Fix the override on the command "
            "line (e.g. `data.batch_size=64`, `model.lr=0.001`) or the value in configs/."
        )
