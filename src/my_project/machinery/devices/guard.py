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

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from ..errors import UserError

_MAX_DEPTH = 6  # of nested lists and dicts
# One fix per kind of mistake; {name}: the attribute.
_REGISTER = (
    'self.register_buffer("{name}", ...) in __init__ (nn.Parameter, nn.ParameterList or '
    "nn.ParameterDict if trained; a torchmetrics metric such as SumMetric for a running "
    "total), or .to(self.device) where it is used"
)
_SUBMODULE = "nn.ModuleList / nn.ModuleDict (torchmetrics.MetricCollection for metrics)"
_METRIC = "a torchmetrics.Metric (state via self.add_state) assigned as a submodule"


@dataclass(frozen=True)
class DeviceProblem:
    """One tensor (or object holding tensors) that will not be where the module is."""

    path: str  # from the checked module, e.g. "net.total" or "metrics['acc']"
    kind: str  # e.g. "plain tensor attribute"
    device: str  # where it is now
    expected: str  # where the module is
    fix: str

    def __str__(self) -> str:
        where = f"on {self.device}" + (
            ", stays there when the module moves"
            if self.device == self.expected
            else f", should be on {self.expected} with the module"
        )
        return f"`{self.path}`: {self.kind}, {where}. Fix: {self.fix}"


class DevicePlacementError(UserError):
    """A module holds tensors that will not follow it to its device (see the message)."""


def find_device_problems(module: nn.Module) -> list[DeviceProblem]:
    """Every tensor of ``module`` that will not follow it to its device. Parameters, buffers
    and metric states are not checked: Lightning moves them with the module."""
    return list(_unregistered(module, str(_device_of(module) or "?")))


def check_device_placement(module: nn.Module) -> None:
    """Raise `DevicePlacementError` naming every problem `find_device_problems` finds."""
    if problems := find_device_problems(module):
        raise DevicePlacementError(describe_problems(problems, module))


def describe_problems(problems: list[DeviceProblem], module: nn.Module) -> str:
    lines = "\n".join(f"  - {problem}" for problem in problems)
    return (
        f"{type(module).__name__} holds {len(problems)} tensor(s) that will not follow it to its "
        f"device ({problems[0].expected}): Lightning moves only parameters, buffers and "
        "torchmetrics metrics registered as submodules, and on a GPU these fail at the first "
        f'step with "Expected all tensors to be on the same device":\n{lines}'
    )


def _unregistered(root: nn.Module, expected: str) -> Iterator[DeviceProblem]:
    """Tensors, modules and metric-like objects in plain attributes of any submodule."""
    from lightning.pytorch import LightningModule

    parameters = {id(t) for t in root.parameters()}
    modules = {id(m) for m in root.modules()}
    # torch's and Lightning's own attributes (Lightning moves `example_input_array` itself)
    skip = set(vars(nn.Module()))
    if isinstance(root, LightningModule):
        skip |= set(vars(LightningModule())) | {"_hparams_initial"}

    def walk(value: Any, path: str, within: str, depth: int) -> Iterator[DeviceProblem]:
        """``within``: "" for an attribute, else the plain container ``value`` is in."""
        held: Any = value
        if isinstance(value, Tensor):
            if id(value) in parameters:  # an alias of a parameter: .to() keeps the object
                return
            kind = f"tensor in a plain {within}" if within else "plain tensor attribute"
            fix = _REGISTER
        elif isinstance(value, nn.Module):
            if not isinstance(value, Metric):  # a metric's states are neither (it has .device)
                held = next(iter([*value.parameters(), *value.buffers()]), None)
            if id(value) in modules or held is None:
                return
            what = "torchmetrics metric" if held is value else type(value).__name__
            kind, fix = f"{what} in a plain {within or 'attribute'}", _SUBMODULE
        elif depth >= _MAX_DEPTH or type(value).__module__.startswith("omegaconf"):
            return  # configs hold plain values (and reading them may resolve interpolations)
        elif isinstance(value, (Mapping, list, tuple)):
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            container = "dict" if isinstance(value, Mapping) else type(value).__name__
            for key, item in items:
                shown = repr(key) if container == "dict" else key
                yield from walk(item, f"{path}[{shown}]", container, depth + 1)
            return
        elif callable(getattr(value, "update", None)) and callable(getattr(value, "compute", None)):
            tensors = [v for v in getattr(value, "__dict__", {}).values() if isinstance(v, Tensor)]
            if isinstance(value, type) or not tensors:
                return
            held, kind = tensors[0], f"{type(value).__name__} (not a torchmetrics Metric)"
            fix = _METRIC
        else:
            return
        name = re.findall(r"[A-Za-z_]\w*", path)[-1]  # "total", "history[0]", "hparams['lr']"
        yield DeviceProblem(path, kind, str(held.device), expected, fix.format(name=name))

    for prefix, module in root.named_modules():
        if isinstance(module, Metric):
            continue  # its states are registered: `_misplaced` checks them
        # recomputed by a forward pre-hook (legacy weight_norm, spectral_norm): they follow
        hooked = {getattr(hook, "name", None) for hook in module._forward_pre_hooks.values()}
        for name, value in vars(module).items():
            if name not in skip and name not in hooked:
                shown = "hparams" if name == "_hparams" else name
                yield from walk(value, f"{prefix}.{shown}" if prefix else shown, "", 0)


def _device_of(module: nn.Module) -> torch.device | None:
    device = getattr(module, "device", None)  # a LightningModule tracks its own
    if isinstance(device, torch.device):
        return device
    return next((t.device for t in (*module.parameters(), *module.buffers())), None)
