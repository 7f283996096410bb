"""Bad input found before anything is trained or written, each as one clear paragraph.

Without these, a wrong type fails deep inside torch (``'<=' not supported between 'float' and
'str'``), a missing GPU says ``No supported gpu backend found!``, a checkpoint of another
model fails with a long key list from ``load_state_dict``, and a batch larger than the data
set silently trains on one short batch per epoch.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..utils.errors import UserError

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


def check_checkpoint_matches(ckpt_path: str, model: Any) -> dict[str, Any]:
    """The checkpoint is readable and holds weights of exactly this model's shapes.

    Returns the checkpoint's training progress (``epoch``, ``global_step``).
    """
    import torch

    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        raise UserError(
            f"ckpt_path={ckpt_path} cannot be read as a checkpoint ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:200]}). It may be truncated or not a checkpoint; use "
            "another one (checkpoints/last.ckpt is written atomically and is always complete)."
        ) from error
    weights = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(weights, dict):
        raise UserError(
            f"ckpt_path={ckpt_path} is not a Lightning checkpoint (no state_dict). Pass a "
            "checkpoint written by this project's train.py."
        )
    expected = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    problems = [f"{k} missing" for k in expected if k not in weights]
    problems += [
        f"{k} has shape {tuple(weights[k].shape)}, the model needs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in weights and tuple(weights[k].shape) != tuple(v.shape)
    ]
    from torchmetrics import Metric  # metric states are optional in a checkpoint

    metrics = tuple(f"{n}." for n, m in model.named_modules() if isinstance(m, Metric))
    problems += [
        f"unexpected {k}" for k in weights if k not in expected and not k.startswith(metrics)
    ]
    if problems:
        saved_net = checkpoint.get("hyper_parameters", {}).get("net")
        hint = f" The checkpoint's network is {saved_net}." if saved_net else ""
        raise UserError(
            f"ckpt_path={ckpt_path} is a checkpoint of a different model: "
            f"{'; '.join(problems[:3])}{' ...' if len(problems) > 3 else ''}.{hint} Use the "
            "same model overrides as the run that wrote it (e.g. `model/net=cnn`), or "
            "`resume=<its run dir>`, which reloads that run's config."
        )
    return {k: checkpoint.get(k) for k in ("epoch", "global_step")}


def check_training_data(datamodule: Any) -> None:
    """Prepare and set up the data now, and check the batch size against the training split."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batch_size = getattr(loader, "batch_size", None)
    # A DataLoader has a dataset; `data.on_device` batches (DeviceBatches) only a sampler.
    source = loader.dataset if hasattr(loader, "dataset") else getattr(loader, "sampler", None)
    try:
        size = len(source)  # type: ignore[arg-type]
    except TypeError:
        return  # an iterable data set has no length to compare with
    if size == 0:
        raise UserError("The training split is empty; check the data directory and fractions.")
    if batch_size is not None and batch_size > size:
        raise UserError(
            f"data.batch_size={batch_size} is larger than the training split ({size} "
            f"examples), so every epoch would be a single short batch. Use "
            f"`data.batch_size={min(size, 64)}` or another value up to {size}."
        )
