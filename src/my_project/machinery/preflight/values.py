"""Config values of the wrong type or out of range, checked before any object is built.

Without these, a wrong type fails deep inside torch (``'<=' not supported between 'float' and
'str'``) or deep inside Lightning's loop, and a value out of range fails there too
(``data.batch_size=0``, ``model.lr=-1``) or does something else than asked
(``trainer.max_epochs=-5`` trains forever). Every value under a ``_target_`` is checked against
the type annotation of the parameter it goes to, and values are checked by key name
(`batch_size`, `lr`, `num_workers`, `*_fraction`...), for any class (the team's too).
"""

from __future__ import annotations

import inspect
import math
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
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


def check_config_resolves(cfg: DictConfig) -> None:
    """Every ``${...}`` of the config resolves.

    Without this, a model config that takes a size from the data config (``num_features:
    ${data.num_features}``) composed with data that does not define it is a traceback from
    deep inside OmegaConf, once the run has started.
    """
    from omegaconf.errors import InterpolationKeyError, InterpolationResolutionError

    try:
        OmegaConf.to_container(cfg, resolve=True)
    except InterpolationResolutionError as error:
        cause: BaseException | None = error
        while cause is not None:  # a resolver of ours that refused its input says why
            if isinstance(cause, UserError):
                raise cause from None
            cause = cause.__cause__
        key = getattr(error, "full_key", None) or "a value"
        problem = str(getattr(error, "msg", None) or error).splitlines()[0]
        if isinstance(error, InterpolationKeyError):
            advice = (
                "A value refers to a key this composition of configs does not have (often a "
                "model config taking a size from data that does not define it). Add the key to "
                f"the config it names, pick configs that have it, or set `{key}=...` yourself."
            )
        else:
            advice = f"Fix what it names, or set `{key}=...` yourself."
        raise UserError(f"{key} cannot be resolved: {problem}. {advice}") from error


def check_global_groups(cfg: DictConfig) -> None:
    """A config file of a group whose files set top-level keys (``experiment``, ``debug``...)
    without ``# @package _global_``: Hydra puts its keys under the group's name
    (``experiment.trainer.max_epochs``), where nothing reads them, and the run would silently
    do something other than the file asks."""
    from ..config import config_dir

    for name in cfg:
        key = str(name)
        folder = config_dir() / key
        files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
        if not files or not all(_declares_global_package(f) for f in files):
            continue
        node = cfg[key]
        keys = ", ".join(f"{key}.{k!s}" for k in node) if isinstance(node, DictConfig) else key
        raise UserError(
            f"The `{key}` config you chose has no `# @package _global_` first line, so Hydra put "
            f"its values under `{key}.` ({keys}), where nothing reads them: the run would "
            f"ignore them. Add `# @package _global_` as the file's first line, as in "
            f"configs/{key}/{files[0].name}."
        )


def check_group_entries(cfg: DictConfig) -> None:
    """An entry of ``logger`` or ``callbacks`` with settings but no ``_target_``: nothing builds
    it. It comes from setting a logger the chosen group does not include
    (``+logger.wandb.project=x`` with ``logger=csv``), and the run would go on without it."""
    choose = {"logger": "logger=[csv,{name}]", "callbacks": "callbacks=[default,{name}]"}
    for group, how in choose.items():
        node = cfg.get(group)
        if not isinstance(node, DictConfig):
            continue
        for key_, entry in node.items():
            name = str(key_)
            if isinstance(entry, DictConfig) and "_target_" not in entry:
                settings = ", ".join(f"{group}.{name}.{key!s}" for key in entry)
                chosen = ", ".join(str(k) for k, v in node.items() if v and "_target_" in v)
                raise UserError(
                    f"`{group}.{name}` has settings ({settings}) but nothing to build: the "
                    f"{group} chosen ({chosen or 'none'}) does not include `{name}`, so the run "
                    f"would go on without it. Choose it first, e.g. "
                    f"`{how.format(name=name)}`, then set `{group}.{name}.<key>=...`."
                )


def _declares_global_package(path: Any) -> bool:
    with open(path) as handle:
        for line in handle:
            if not line.strip():
                continue
            if not line.startswith("#"):
                return False
            if line.replace(" ", "").startswith("#@package_global_"):
                return True
    return False


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


# -- values out of range ------------------------------------------------------------------
# Trainer arguments Lightning checks late or not at all (a negative max_epochs trains forever,
# num_nodes=0 fails inside the launcher), with what is allowed.
_TRAINER_RANGES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "max_epochs": ("a whole number >= 0, or -1 for no limit", lambda v: v >= -1),
    "min_epochs": ("a whole number >= 0", lambda v: v >= 0),
    "max_steps": ("a whole number >= 0, or -1 for no limit", lambda v: v >= -1),
    "min_steps": ("a whole number >= 0", lambda v: v >= 0),
    "num_nodes": ("a whole number >= 1", lambda v: v >= 1),
    "log_every_n_steps": ("a whole number >= 1", lambda v: v >= 1),
    "accumulate_grad_batches": ("a whole number >= 1", lambda v: v >= 1),
    "check_val_every_n_epoch": ("a whole number >= 1", lambda v: v >= 1),
    "num_sanity_val_steps": ("a whole number >= 0, or -1 for all", lambda v: v >= -1),
    "gradient_clip_val": ("a number >= 0", lambda v: v >= 0),
}
_BATCH_LIMITS = (
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
    "overfit_batches",
)


def _fraction_or_count(value: Any, low_open: bool = False) -> bool:
    if isinstance(value, float):
        return (value > 0.0 if low_open else value >= 0.0) and value <= 1.0
    return value >= (1 if low_open else 0)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def trainer_range_errors(trainer: Mapping[str, Any]) -> list[str]:
    errors = []
    for field, (allowed, valid) in _TRAINER_RANGES.items():
        value = trainer.get(field)
        if _number(value) and not valid(value):
            errors.append(f"`trainer.{field}={value!r}` must be {allowed}")
    for field in _BATCH_LIMITS:
        value = trainer.get(field)
        if _number(value) and not _fraction_or_count(value):
            errors.append(
                f"`trainer.{field}={value!r}` must be a fraction of the batches in [0.0, 1.0] "
                "or a number of batches >= 0"
            )
    value = trainer.get("val_check_interval")
    if _number(value) and not _fraction_or_count(value, low_open=True):
        errors.append(
            f"`trainer.val_check_interval={value!r}` must be a fraction of an epoch in "
            "(0.0, 1.0] or a number of batches >= 1"
        )
    return errors


# Keys any data or model config may have (the team's too), by name, with what they allow.
def _rule_for(key: str) -> tuple[str, Callable[[Any], bool], bool] | None:
    """(what is allowed, the test, whole numbers only) for a key name; None: no rule."""
    name = key.lower()
    if name == "batch_size" or name.endswith("_batch_size"):
        return "a whole number >= 1", lambda v: v >= 1, True
    if name == "num_workers":
        return "a whole number >= 0 (0 loads in the main process)", lambda v: v >= 0, True
    if name in ("lr", "learning_rate") or name.endswith(("_lr", "_learning_rate")):
        return "a number >= 0", lambda v: v >= 0, False
    if name == "weight_decay":
        return "a number >= 0", lambda v: v >= 0, False
    if name == "fraction" or name.endswith("_fraction"):
        return "a fraction in [0.0, 1.0]", lambda v: 0 <= v <= 1, False
    if name == "dropout" or name.endswith("_dropout"):
        return "a probability in [0.0, 1.0)", lambda v: 0 <= v < 1, False
    return None


def named_value_errors(node: Any, path: str = "") -> list[str]:
    """Values of `batch_size`, `lr`, `num_workers`, `*_fraction`... keys anywhere in ``node``
    that are out of range; and fractions of one mapping that add up to more than 1."""
    errors: list[str] = []
    if isinstance(node, Mapping):
        fractions = {}
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            rule = _rule_for(str(key))
            if rule is not None and _number(value):
                allowed, valid, whole = rule
                if not math.isfinite(value):  # inf passes `>= 0`; the run would end in NaNs
                    errors.append(f"`{where}={value!r}` must be a finite number ({allowed})")
                elif (whole and not isinstance(value, int)) or not valid(value):
                    errors.append(f"`{where}={value!r}` must be {allowed}")
                elif allowed.startswith("a fraction"):
                    fractions[where] = value
            errors.extend(named_value_errors(value, where))
        if len(fractions) > 1 and sum(fractions.values()) > 1:
            listed = " + ".join(f"`{k}={v!r}`" for k, v in fractions.items())
            errors.append(f"{listed} add up to more than 1, leaving nothing for the rest")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            errors.extend(named_value_errors(item, f"{path}[{i}]"))
    return errors


def empty_dir_errors(node: Any, path: str = "") -> list[str]:
    """Folders (`*_dir`, `dirpath` keys, any config) given as an empty string: what is written
    there would land in the current directory, or at the filesystem's root below it
    (`${paths.data_dir}/mnist` is `/mnist`)."""
    errors: list[str] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            name = str(key).lower()
            is_dir = name in ("dir", "dirpath") or name.endswith("_dir")
            if is_dir and isinstance(value, str) and not value.strip():
                variables = sorted(
                    v for v, text in os.environ.items() if v.endswith("_DIR") and not text.strip()
                )
                cause = f", as {', '.join(variables)} is set but empty" if variables else ""
                errors.append(f"`{where}=` is empty{cause}: give it a folder, or unset it")
            else:
                errors.extend(empty_dir_errors(value, where))
    return errors


def unavailable_accelerator_errors(trainer: Mapping[str, Any]) -> list[str]:
    """An accelerator Lightning knows but this machine lacks (e.g. `tpu`). The CPU, CUDA and
    MPS, and how many devices, are `devices.py`'s."""
    accelerator = trainer.get("accelerator")
    if not isinstance(accelerator, str):
        return []
    name = accelerator.lower()
    if name in ("auto", "gpu", "cpu", "cuda", "mps"):
        return []
    from lightning.pytorch.accelerators import AcceleratorRegistry

    if name not in AcceleratorRegistry or AcceleratorRegistry[name]["accelerator"].is_available():
        return []
    return [
        f"`trainer.accelerator={accelerator}` is not available on this machine (Lightning finds "
        "no such device); use `trainer.accelerator=auto` for the GPU when there is one and the "
        "CPU otherwise"
    ]


def check_value_ranges(cfg: DictConfig) -> None:
    """Trainer arguments, and by key name any data/model value, within what they allow."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    trainer = container.get("trainer") or {}
    errors = unavailable_accelerator_errors(trainer) + trainer_range_errors(trainer)
    errors += named_value_errors({k: v for k, v in container.items() if k != "trainer"})
    errors += empty_dir_errors({k: v for k, v in container.items() if k != "hydra"})
    if errors:
        raise UserError(
            f"Value out of range in the config: {'; '.join(errors)}. Fix the override on the "
            "command line or the value in configs/."
        )


def nothing_validated_warning(cfg: DictConfig) -> str | None:
    """A warning when the config validates nothing (`*val*_fraction=0`, `limit_val_batches=0`):
    what it means for the metrics and for the checkpoints that monitor a validation metric."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    data = container.get("data") or {}
    trainer = container.get("trainer") or {}
    cause = next(
        (
            f"data.{key}=0"
            for key, value in data.items()
            if "val" in str(key).lower() and str(key).endswith("fraction") and value == 0
        ),
        "trainer.limit_val_batches=0" if trainer.get("limit_val_batches") == 0 else None,
    )
    if cause is None:
        return None
    monitors = sorted(
        f"`callbacks.{name}` (monitor {entry['monitor']})"
        for name, entry in (container.get("callbacks") or {}).items()
        if isinstance(entry, Mapping) and str(entry.get("monitor") or "").startswith("val")
    )
    kept = (
        f"{', '.join(monitors)} never saves, so checkpoints/last.ckpt (the newest weights) is "
        "the only checkpoint, and the test uses the weights at the end of training"
        if monitors
        else "the test uses the weights at the end of training"
    )
    return (
        f"Warning: {cause}: nothing is validated, so no `val/` metrics are logged and {kept}. "
        "Give the validation split a fraction (e.g. `data.val_fraction=0.15`) to keep the "
        "best epoch."
    )
