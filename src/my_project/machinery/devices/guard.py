"""Find the tensors of a module that will not follow it to its device, before a step fails.

Lightning moves parameters, buffers and torchmetrics metrics registered as submodules; a
plain tensor attribute (``self.total = torch.tensor(0.)``), a tensor or a module inside a
list or dict attribute, or a hand-written metric object stays where it was created. On a
GPU the first step then fails with "Expected all tensors to be on the same device", naming
no attribute. :func:`find_device_problems` names them, with the fix, on any device (moving
a module to ``"meta"`` shows in a CPU-only test what a GPU run would see):

    check_device_placement(model.to("meta"))   # in your own tests

PyTorch and Lightning have no such check (``ModelSummary`` counts parameters, nothing more),
hence this walk. It runs once per call, never per step.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import UserError

# Attributes that every nn.Module / LightningModule has: torch's own bookkeeping
# (`_parameters`, `_buffers`, `_modules` are checked on their own below) and Lightning's
# (`_trainer`, `_fabric_optimizers`, `_example_input_array`, which Lightning moves itself
# when it uses it, ...). Computed from the installed versions, so new internals are covered.
_TORCH_INTERNALS = frozenset(vars(nn.Module()))
# Lightning keeps a private copy of the hyperparameters for logging; the user's
# `self.hparams` (`_hparams`) is walked.
_LIGHTNING_EXTRA = frozenset({"_hparams_initial"})
_MAX_DEPTH = 6
_MAX_LINES = 20  # in a message; find_device_problems returns all


@dataclass(frozen=True)
class DeviceProblem:
    """One tensor (or object holding tensors) that will not be where the module is."""

    path: str  # dotted path from the checked module, e.g. "net.total" or "metrics['acc']"
    kind: str  # what it is, e.g. "plain tensor attribute"
    device: str  # where it is now
    expected: str  # where the module is
    fix: str

    def __str__(self) -> str:
        if self.device == self.expected:
            where = (
                f"on {self.device} like the module now, but it stays there when the module "
                "moves to another device"
            )
        else:
            where = f"on {self.device}, should be on {self.expected} with the module"
        return f"`{self.path}`: {self.kind}, {where}. Fix: {self.fix}"


class DevicePlacementError(UserError):
    """A module holds tensors that will not follow it to its device (see the message)."""


def find_device_problems(
    module: nn.Module,
    device: torch.device | str | None = None,
    ignore: Iterable[str] = (),
    check_registered: bool = True,
) -> list[DeviceProblem]:
    """Every tensor of ``module`` that will not follow it, or is not on its device.

    ``device`` defaults to the module's own (a LightningModule's ``.device``, else that of its
    first parameter or buffer). ``ignore``: paths (shell-style patterns, e.g. ``"teacher"`` or
    ``"cache*"``) to leave out, with everything under them. ``check_registered=False`` skips
    the device check of parameters, buffers and metric states (for strategies that shard or
    offload them on purpose).
    """
    expected = torch.device(device) if device is not None else _module_device(module)
    problems = list(_unregistered(module, expected))
    if check_registered:
        problems += _misplaced(module, expected)
    patterns = list(ignore)
    return [p for p in problems if not _ignored(p.path, patterns)]


def check_device_placement(
    module: nn.Module, device: torch.device | str | None = None, ignore: Iterable[str] = ()
) -> None:
    """Raise :class:`DevicePlacementError` naming every problem :func:`find_device_problems` finds."""
    problems = find_device_problems(module, device, ignore)
    if problems:
        raise DevicePlacementError(describe_problems(problems, module))


def describe_problems(problems: list[DeviceProblem], module: nn.Module) -> str:
    """One message for all problems: what is wrong, why it matters, one line per tensor."""
    expected = problems[0].expected
    lines = "\n".join(f"  - {problem}" for problem in problems[:_MAX_LINES])
    if len(problems) > _MAX_LINES:
        lines += f"\n  ... and {len(problems) - _MAX_LINES} more"
    return (
        f"{type(module).__name__} holds {len(problems)} tensor(s) that will not follow it to its "
        f"device ({expected}), or are not on it. Lightning moves parameters, buffers and "
        "torchmetrics metrics registered as submodules, and nothing else; these fail at the "
        'first step on a GPU with "Expected all tensors to be on the same device", which names '
        f"none of them:\n{lines}"
    )


# -- the walk --------------------------------------------------------------------------------


def _unregistered(root: nn.Module, expected: torch.device | None) -> Iterator[DeviceProblem]:
    """Tensors, modules and metric-like objects hidden in plain attributes of any submodule."""
    from torchmetrics import Metric

    parameters = {id(t): name for name, t in root.named_parameters(remove_duplicate=False)}
    buffers = {id(t): name for name, t in root.named_buffers(remove_duplicate=False)}
    modules = {id(m) for m in root.modules()}
    skip = _TORCH_INTERNALS | _lightning_internals(root)
    where = str(expected) if expected is not None else "?"
    for prefix, owner in root.named_modules():
        if isinstance(owner, Metric):
            continue  # its states are registered with torchmetrics; _misplaced checks them
        hooked = {getattr(h, "name", None) for h in owner._forward_pre_hooks.values()}
        for name, value in vars(owner).items():
            # Recomputed in a forward pre-hook (legacy weight_norm/spectral_norm): follows.
            if name in skip or name in hooked:
                continue
            shown = "hparams" if name == "_hparams" else name
            path = f"{prefix}.{shown}" if prefix else shown
            context = _Context(parameters, buffers, modules, where, type(owner).__name__, name)
            yield from _walk(value, path, None, context, 0, set())


@dataclass(frozen=True)
class _Context:
    parameters: dict[int, str]
    buffers: dict[int, str]
    modules: set[int]
    expected: str
    owner: str  # class name of the module holding the attribute
    attribute: str  # the attribute's own name, for the fix


def _walk(
    value: Any, path: str, container: str | None, ctx: _Context, depth: int, seen: set[int]
) -> Iterator[DeviceProblem]:
    from torchmetrics import Metric

    if isinstance(value, Tensor):
        if id(value) in ctx.parameters:
            return  # an alias of a registered parameter: .to() keeps the Parameter object
        kind, fix = _tensor_kind_and_fix(value, path, container, ctx)
        yield DeviceProblem(path, kind, str(value.device), ctx.expected, fix)
    elif isinstance(value, nn.Module):
        if id(value) in ctx.modules:
            return  # registered, possibly under another name
        holder = f"nn.Module{'Dict' if container == 'dict' else 'List'}(...)"
        where = f"in a plain {container}" if container else "set around nn.Module.__setattr__"
        if isinstance(value, Metric):
            kind = f"torchmetrics metric {where} (not a submodule)"
            fix = (
                f"{holder} or torchmetrics.MetricCollection(...), so it moves, syncs across "
                "processes and is saved with the module"
            )
            yield DeviceProblem(path, kind, str(value.device), ctx.expected, fix)
        elif (first := next(_tensors_of(value), None)) is not None:
            kind = f"{type(value).__name__} module {where} (its parameters are not moved, trained or saved)"
            fix = (
                holder
                if container
                else f"a plain `self.{ctx.attribute} = ...` in {ctx.owner}.__init__"
            )
            yield DeviceProblem(path, kind, str(first.device), ctx.expected, fix)
    elif depth >= _MAX_DEPTH or id(value) in seen or _is_config(value):
        return
    elif isinstance(value, Mapping):
        seen.add(id(value))
        for key, item in value.items():
            yield from _walk(item, f"{path}[{key!r}]", "dict", ctx, depth + 1, seen)
    elif isinstance(value, (list, tuple)):
        seen.add(id(value))
        kind = "list" if isinstance(value, list) else "tuple"
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]", kind, ctx, depth + 1, seen)
    elif _is_metric_like(value):
        seen.add(id(value))
        first = next((v for v in vars(value).values() if isinstance(v, Tensor)), None)
        if first is not None:
            kind = f"{type(value).__name__} object with update()/compute() holding tensors (not a torchmetrics Metric)"
            fix = (
                "make it a torchmetrics.Metric (state via self.add_state(...)) assigned as an "
                "attribute of the module, or use a torchmetrics metric (SumMetric, MeanMetric, ...)"
            )
            yield DeviceProblem(path, kind, str(first.device), ctx.expected, fix)


def _tensor_kind_and_fix(
    tensor: Tensor, path: str, container: str | None, ctx: _Context
) -> tuple[str, str]:
    if id(tensor) in ctx.buffers:
        buffer = ctx.buffers[id(tensor)]
        return (
            f"the same tensor as buffer `{buffer}`, kept in a plain attribute",
            f".to() replaces buffers, so this attribute keeps the old one: read `self.{buffer}` "
            "(or a @property returning it) instead",
        )
    if ctx.attribute == "_hparams":
        key = re.search(r"\['([^']+)'\]", path)
        name = key.group(1) if key else "name"
        return "tensor in the hyperparameters", (
            f'self.register_buffer("{name}", torch.as_tensor(...)) in {ctx.owner}.__init__ and '
            f"use self.{name}; keep plain numbers and lists in the hyperparameters"
        )
    if container is None:
        return "plain tensor attribute", (
            f'self.register_buffer("{ctx.attribute}", <the tensor>) in {ctx.owner}.__init__ '
            "(persistent=False keeps it out of checkpoints); for a running sum or mean, a "
            "torchmetrics metric (SumMetric, MeanMetric) assigned as an attribute"
        )
    plural = "Dict" if container == "dict" else "List"
    if isinstance(tensor, nn.Parameter):
        return (
            f"parameter in a plain {container} (not moved, trained or saved)",
            f"nn.Parameter{plural}(...) for `{ctx.attribute}` in {ctx.owner}.__init__",
        )
    return f"tensor in a plain {container}", (
        f"one self.register_buffer(...) per {'key' if container == 'dict' else 'item'}, or "
        f'torch.stack them into one self.register_buffer("{ctx.attribute}", ...), in '
        f"{ctx.owner}.__init__; nn.Parameter{plural}(...) if they are trained"
    )


def _misplaced(root: nn.Module, expected: torch.device | None) -> Iterator[DeviceProblem]:
    """Registered tensors (parameters, buffers, metric states) not on the module's device."""
    from torchmetrics import Metric

    if expected is None:
        return
    fix = (
        "create it in __init__ with no device=/.to(...) and let Lightning move the whole "
        "module; do not move parts of the module by hand after Lightning did"
    )
    for kind, named in (
        ("parameter", root.named_parameters()),
        ("buffer", root.named_buffers()),
    ):
        for path, tensor in named:
            if not _same_device(tensor.device, expected):
                yield DeviceProblem(path, kind, str(tensor.device), str(expected), fix)
    for prefix, metric in root.named_modules():
        if not isinstance(metric, Metric):
            continue
        for state in metric._defaults:
            value = getattr(metric, state)
            if isinstance(value, Tensor):
                states = [(f"{prefix}.{state}", value)]
            elif metric.compute_on_cpu:
                continue  # compute_on_cpu keeps list states on the CPU on purpose
            else:
                states = [(f"{prefix}.{state}[{i}]", t) for i, t in enumerate(value)]
            for path, tensor in states:
                if not _same_device(tensor.device, expected):
                    kind = "torchmetrics metric state"
                    yield DeviceProblem(path, kind, str(tensor.device), str(expected), fix)


# -- small helpers -----------------------------------------------------------------------------


def _module_device(module: nn.Module) -> torch.device | None:
    device = getattr(module, "device", None)  # a LightningModule tracks its own
    if isinstance(device, torch.device):
        return device
    return next((t.device for t in _tensors_of(module)), None)


def _tensors_of(module: nn.Module) -> Iterator[Tensor]:
    yield from module.parameters()
    yield from module.buffers()


def _lightning_internals(module: nn.Module) -> frozenset[str]:
    try:
        from lightning.pytorch import LightningModule
    except ImportError:  # the walk works on plain nn.Modules without Lightning
        return frozenset()
    if not isinstance(module, LightningModule):
        return frozenset()
    return _lightning_module_attributes() | _LIGHTNING_EXTRA


_LIGHTNING_ATTRIBUTES: frozenset[str] | None = None


def _lightning_module_attributes() -> frozenset[str]:
    """Attributes a bare LightningModule sets on itself (computed once)."""
    global _LIGHTNING_ATTRIBUTES
    if _LIGHTNING_ATTRIBUTES is None:
        from lightning.pytorch import LightningModule

        _LIGHTNING_ATTRIBUTES = frozenset(vars(LightningModule()))
    return _LIGHTNING_ATTRIBUTES


def _is_config(value: Any) -> bool:
    """OmegaConf containers hold plain values only; reading them may resolve interpolations."""
    return type(value).__module__.startswith("omegaconf")


def _is_metric_like(value: Any) -> bool:
    return (
        hasattr(value, "__dict__")
        and callable(getattr(value, "update", None))
        and callable(getattr(value, "compute", None))
        and not isinstance(value, type)
    )


def _same_device(actual: torch.device, expected: torch.device) -> bool:
    """`cuda` (no index) matches any `cuda:N`; an explicit index must match."""
    if actual.type != expected.type:
        return False
    return actual.index is None or expected.index is None or actual.index == expected.index


def _ignored(path: str, patterns: list[str]) -> bool:
    return any(
        fnmatch.fnmatchcase(path, pattern) or path.startswith((f"{pattern}.", f"{pattern}["))
        for pattern in patterns
    )
