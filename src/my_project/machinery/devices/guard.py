"""Find the tensors of a module that will not follow it to its device, before a step fails.

Lightning moves parameters, buffers and torchmetrics metrics registered as submodules; a plain
tensor attribute (``self.total = torch.tensor(0.)``), a tensor or module in a list or dict
attribute, or a hand-written metric object stays where it was made, and on a GPU the first step
fails with "Expected all tensors to be on the same device", naming none of them. PyTorch and
Lightning have no such check, hence this walk (once per call, never per step). Moving a module
to ``"meta"`` shows in a CPU-only test what a GPU run would see:

    check_device_placement(model.to("meta"))   # in your own tests
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from ..errors import UserError

_MAX_DEPTH, _MAX_LINES = 6, 20
_MOVE_ALL = (
    "create it in __init__ with no device=/.to(...) and let Lightning move the whole module; do "
    "not move parts of the module by hand after Lightning did"
)


@dataclass(frozen=True)
class DeviceProblem:
    """One tensor (or object holding tensors) that will not be where the module is."""

    path: str  # from the checked module, e.g. "net.total" or "metrics['acc']"
    kind: str  # e.g. "plain tensor attribute"
    device: str  # where it is now
    expected: str  # where the module is
    fix: str

    def __str__(self) -> str:
        where = (
            f"on {self.device} like the module now, but it stays there when the module moves "
            "to another device"
            if self.device == self.expected
            else f"on {self.device}, should be on {self.expected} with the module"
        )
        return f"`{self.path}`: {self.kind}, {where}. Fix: {self.fix}"


class DevicePlacementError(UserError):
    """A module holds tensors that will not follow it to its device (see the message)."""


def find_device_problems(
    module: nn.Module,
    device: torch.device | str | None = None,
    ignore: Iterable[str] = (),
    check_registered: bool = True,
) -> list[DeviceProblem]:
    """Every tensor of ``module`` that will not follow it, or is not on its device (default:
    the module's own). ``ignore``: paths (shell-style patterns) left out with all under them;
    ``check_registered=False`` skips parameters, buffers and metric states (for strategies
    that shard or offload them on purpose)."""
    expected = torch.device(device) if device is not None else _device_of(module)
    problems = list(_unregistered(module, str(expected or "?")))
    if check_registered and expected is not None:
        problems += _misplaced(module, expected)
    patterns = list(ignore)
    return [p for p in problems if not any(_under(p.path, pattern) for pattern in patterns)]


def _under(path: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern) or path.startswith((f"{pattern}.", f"{pattern}["))


def check_device_placement(
    module: nn.Module, device: torch.device | str | None = None, ignore: Iterable[str] = ()
) -> None:
    """Raise `DevicePlacementError` naming every problem `find_device_problems` finds."""
    if problems := find_device_problems(module, device, ignore):
        raise DevicePlacementError(describe_problems(problems, module))


def describe_problems(problems: list[DeviceProblem], module: nn.Module) -> str:
    lines = "\n".join(f"  - {problem}" for problem in problems[:_MAX_LINES])
    if len(problems) > _MAX_LINES:
        lines += f"\n  ... and {len(problems) - _MAX_LINES} more"
    return (
        f"{type(module).__name__} holds {len(problems)} tensor(s) that will not follow it to its "
        f"device ({problems[0].expected}), or are not on it. Lightning moves parameters, buffers "
        "and torchmetrics metrics registered as submodules, and nothing else; these fail at the "
        'first step on a GPU with "Expected all tensors to be on the same device", which names '
        f"none of them:\n{lines}"
    )


def _unregistered(root: nn.Module, expected: str) -> Iterator[DeviceProblem]:
    """Tensors, modules and metric-like objects in plain attributes of any submodule."""
    from lightning.pytorch import LightningModule

    parameters = {id(t) for t in root.parameters()}
    buffers = {id(t): n for n, t in root.named_buffers(remove_duplicate=False)}
    modules = {id(m) for m in root.modules()}
    # torch's and Lightning's own attributes (Lightning moves `example_input_array` itself)
    skip = set(vars(nn.Module()))
    if isinstance(root, LightningModule):
        skip |= set(vars(LightningModule())) | {"_hparams_initial"}

    def walk(value: Any, path: str, within: str | None, depth: int) -> Iterator[DeviceProblem]:
        """``within``: the plain container (list, tuple, dict) ``value`` is in."""
        holder = f"nn.Module{'Dict' if within == 'dict' else 'List'}(...)"
        where = f"in a plain {within}" if within else "set around nn.Module.__setattr__"
        first: Any = value
        if isinstance(value, Tensor):
            if id(value) in parameters:  # an alias of a parameter: .to() keeps the object
                return
            kind, fix = _tensor_fix(value, path, within, buffers.get(id(value)), owner, name)
        elif isinstance(value, Metric):
            if id(value) in modules:
                return
            kind = f"torchmetrics metric {where} (not a submodule)"
            fix = f"{holder} or torchmetrics.MetricCollection(...), so it moves, syncs across processes and is saved with the module"
        elif isinstance(value, nn.Module):
            first = next(iter([*value.parameters(), *value.buffers()]), None)
            if id(value) in modules or first is None:
                return
            kind = f"{type(value).__name__} module {where} (its parameters are not moved, trained or saved)"
            fix = holder if within else f"a plain `self.{name} = ...` in {owner}.__init__"
        elif depth >= _MAX_DEPTH or type(value).__module__.startswith("omegaconf"):
            return  # configs hold plain values (and reading them may resolve interpolations)
        elif isinstance(value, (Mapping, list, tuple)):
            kind = (
                "dict"
                if isinstance(value, Mapping)
                else "list"
                if isinstance(value, list)
                else "tuple"
            )
            for key, item in value.items() if isinstance(value, Mapping) else enumerate(value):
                shown = repr(key) if kind == "dict" else key
                yield from walk(item, f"{path}[{shown}]", kind, depth + 1)
            return
        elif callable(getattr(value, "update", None)) and callable(getattr(value, "compute", None)):
            tensors = [v for v in getattr(value, "__dict__", {}).values() if isinstance(v, Tensor)]
            if isinstance(value, type) or not tensors:
                return
            first = tensors[0]
            kind = f"{type(value).__name__} object with update()/compute() holding tensors (not a torchmetrics Metric)"
            fix = (
                "make it a torchmetrics.Metric (state via self.add_state(...)) assigned as an "
                "attribute of the module, or use a torchmetrics metric (SumMetric, MeanMetric, ...)"
            )
        else:
            return
        yield DeviceProblem(path, kind, str(first.device), expected, fix)

    for prefix, module in root.named_modules():
        if isinstance(module, Metric):
            continue  # its states are registered: `_misplaced` checks them
        # recomputed by a forward pre-hook (legacy weight_norm, spectral_norm): they follow
        hooked = {getattr(hook, "name", None) for hook in module._forward_pre_hooks.values()}
        owner = type(module).__name__
        for name, value in vars(module).items():
            if name not in skip and name not in hooked:
                shown = "hparams" if name == "_hparams" else name
                yield from walk(value, f"{prefix}.{shown}" if prefix else shown, None, 0)


def _tensor_fix(
    tensor: Tensor, path: str, within: str | None, buffer: str | None, owner: str, name: str
) -> tuple[str, str]:
    """(kind, fix) of a tensor in attribute ``name`` of a module of class ``owner``."""
    plural = "Dict" if within == "dict" else "List"
    if buffer is not None:
        return f"the same tensor as buffer `{buffer}`, kept in a plain attribute", (
            f".to() replaces buffers, so this attribute keeps the old one: read `self.{buffer}` "
            "(or a @property returning it) instead"
        )
    if name == "_hparams":
        key = (re.search(r"\['([^']+)'\]", path) or [None, "name"])[1]
        return "tensor in the hyperparameters", (
            f'self.register_buffer("{key}", torch.as_tensor(...)) in {owner}.__init__ and use '
            f"self.{key}; keep plain numbers and lists in the hyperparameters"
        )
    if within is None:
        return "plain tensor attribute", (
            f'self.register_buffer("{name}", <the tensor>) in {owner}.__init__ (persistent=False '
            "keeps it out of checkpoints); for a running sum or mean, a torchmetrics metric "
            "(SumMetric, MeanMetric) assigned as an attribute"
        )
    if isinstance(tensor, nn.Parameter):
        kind = f"parameter in a plain {within} (not moved, trained or saved)"
        return kind, f"nn.Parameter{plural}(...) for `{name}` in {owner}.__init__"
    return f"tensor in a plain {within}", (
        f"one self.register_buffer(...) per {'key' if within == 'dict' else 'item'}, or "
        f'torch.stack them into one self.register_buffer("{name}", ...), in {owner}.__init__; '
        f"nn.Parameter{plural}(...) if they are trained"
    )


def _misplaced(root: nn.Module, expected: torch.device) -> Iterator[DeviceProblem]:
    """Registered tensors (parameters, buffers, metric states) not on the module's device."""
    named: list[tuple[str, str, Tensor]] = [("parameter", p, t) for p, t in root.named_parameters()]
    named += [("buffer", path, t) for path, t in root.named_buffers()]
    for prefix, metric in root.named_modules():
        for state, value in metric.metric_state.items() if isinstance(metric, Metric) else ():
            if isinstance(value, Tensor) or not metric.compute_on_cpu:  # which keeps lists there
                values = (
                    [(f"{prefix}.{state}", value)]
                    if isinstance(value, Tensor)
                    else [(f"{prefix}.{state}[{i}]", t) for i, t in enumerate(value)]
                )
                named += [("torchmetrics metric state", path, t) for path, t in values]
    for kind, path, tensor in named:
        device = tensor.device
        index_differs = (
            None not in (device.index, expected.index) and device.index != expected.index
        )
        if device.type != expected.type or index_differs:
            yield DeviceProblem(path, kind, str(device), str(expected), _MOVE_ALL)


def _device_of(module: nn.Module) -> torch.device | None:
    device = getattr(module, "device", None)  # a LightningModule tracks its own
    if isinstance(device, torch.device):
        return device
    return next((t.device for t in (*module.parameters(), *module.buffers())), None)
