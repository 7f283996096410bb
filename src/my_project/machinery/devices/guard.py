"""Find the tensors of a module that will not follow it to its device, before a step fails.

Lightning moves parameters, buffers and torchmetrics metrics registered as submodules; a plain
tensor attribute (``self.total = torch.tensor(0.)``) or a tensor, module or metric in a list or
dict attribute stays where it was made, and on a GPU the first step fails naming none of them.
Neither PyTorch nor Lightning checks this. ``check_device_placement(model.to("meta"))`` shows on
a CPU what a GPU run would see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn
from torchmetrics import Metric

from ..errors import UserError


class DevicePlacementError(UserError):
    """A module holds tensors that will not follow it to its device (see the message)."""


def find_device_problems(root: nn.Module) -> list[str]:
    """One line per tensor (or module holding some) in a plain attribute of ``root`` or of a
    submodule, naming it and the fix."""
    from lightning.pytorch import LightningModule

    parameters = {id(t) for t in root.parameters()}  # an alias of one: .to() keeps the object
    modules = {id(m) for m in root.modules()}
    skip = set(vars(nn.Module()))  # torch's and Lightning's own attributes
    if isinstance(root, LightningModule):  # (Lightning moves `example_input_array` itself)
        skip |= set(vars(LightningModule())) | {"_hparams_initial"}
    problems: list[str] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if isinstance(value, Tensor) and id(value) not in parameters:
            name = re.findall(r"[A-Za-z_]\w*", path)[-1]  # "total", "history[0]", "hparams['w']"
            problems.append(
                f'`{path}` (a tensor on {value.device}): self.register_buffer("{name}", ...) in '
                "__init__ (nn.Parameter or nn.ParameterList/Dict if trained, a torchmetrics "
                "metric such as SumMetric for a running total), or .to(self.device) where used"
            )
        elif isinstance(value, nn.Module) and id(value) not in modules:
            if isinstance(value, Metric) or [*value.parameters(), *value.buffers()]:
                problems.append(
                    f"`{path}` (a {type(value).__name__} in a plain container): nn.ModuleList "
                    "/ nn.ModuleDict (torchmetrics.MetricCollection for metrics)"
                )
        elif type(value).__module__.startswith("omegaconf") or depth >= 6:
            return  # configs hold plain values (reading them may resolve interpolations)
        elif isinstance(value, (Mapping, list, tuple)):
            for key, item in value.items() if isinstance(value, Mapping) else enumerate(value):
                walk(item, f"{path}[{key!r}]", depth + 1)

    for prefix, module in root.named_modules():
        if isinstance(module, Metric):
            continue  # its states are registered
        # recomputed by a forward pre-hook (legacy weight_norm, spectral_norm): they follow
        hooked = {getattr(hook, "name", None) for hook in module._forward_pre_hooks.values()}
        for name, value in vars(module).items():
            if name not in skip and name not in hooked:
                shown = "hparams" if name == "_hparams" else name
                walk(value, f"{prefix}.{shown}" if prefix else shown, 0)
    return problems


def check_device_placement(module: nn.Module, problems: list[str] | None = None) -> None:
    """Raise `DevicePlacementError` naming every problem (by default `find_device_problems`')."""
    if problems := find_device_problems(module) if problems is None else problems:
        raise DevicePlacementError(
            f"{type(module).__name__} holds tensors that will not follow it to its device: "
            "Lightning moves only parameters, buffers and registered submodules, and on a GPU "
            'these fail at the first step with "Expected all tensors to be on the same device". '
            "Fix:\n" + "\n".join(f"  - {problem}" for problem in problems)
        )
