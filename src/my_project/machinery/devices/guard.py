"""Tensors that did not follow a module to its device, found where they meet the module's own.

Lightning moves parameters, buffers and registered submodules (torchmetrics metrics too); a
plain tensor attribute (``self.total = torch.tensor(0.)``), or a tensor, module or metric in a
list or dict attribute, stays where it was made. That is a fault only where such a tensor meets
the module's in an operation: a module may move it itself (``self.class_weights.to(self.device)``)
or use it as torch allows across devices (a CPU index, a 0-dim CPU scalar). So the watch judges
operations, not attributes. On a real device, an operation torch refuses for its devices is
named with the tensor it received, where it came from and a fix, and is finished with that tensor
moved, so that every process of a run reaches the same stop. On ``meta``, a CPU's stand-in for a
GPU in tests, where torch checks devices only in part, an operation that receives a tensor left
behind, other than a move or an index, is named likewise:

    with watch_devices(model.to("meta")):
        model.training_step(batch_on_meta, 0)  # raises at the end, naming each tensor and its fix
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torchmetrics import Metric

from ..errors import UserError

# Operations that take tensors of several devices by design: moves and copies, shapes read from
# another tensor, and indexing (index tensors may stay on the CPU).
_ACROSS_DEVICES = {
    "to", "type_as", "copy_", "cpu", "cuda", "new_tensor", "view_as", "expand_as", "reshape_as",
    "__getitem__", "__setitem__", "index_put_", "__repr__", "__format__", "__str__",
}  # fmt: skip


def _bincount_on_meta(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    return torch.zeros(
        minlength, dtype=torch.long if weights is None else weights.dtype, device=x.device
    )


# What needs a tensor's data, which `meta` has not: a stand-in, so that a module's steps on
# `meta` run through (torchmetrics reads whether its inputs hold NaN, and counts classes).
_ON_META: dict[str, Any] = {
    "__bool__": lambda *_: False,
    "item": lambda *_: 0,
    "__int__": lambda *_: 0,
    "__float__": lambda *_: 0.0,
    "bincount": _bincount_on_meta,
}
# torch's words when an operation gets tensors of two devices (not out-of-memory's)
_ABOUT_DEVICES = re.compile(r"(same|expected|the) device|devices|is on CPU|on GPU", re.IGNORECASE)
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the machinery
_LIBRARIES = tuple(
    os.path.join(os.path.realpath(sysconfig.get_path(n)), "") for n in ("stdlib", "purelib")
)


class DevicePlacementError(UserError):
    """A module's tensors met on different devices (see the message)."""


@dataclass(frozen=True)
class LeftBehind:
    """A tensor the module holds that Lightning does not move: where it is, and the fix."""

    path: str  # "total", "history[0]", "hparams['w']", "heads[0]" (a module holding it)
    what: str  # "a tensor", "a Linear in a plain list or dict"
    fix: str


def left_behind(root: nn.Module) -> dict[int, tuple[Tensor, LeftBehind]]:
    """Every tensor of ``root`` that will not follow it to its device, by ``id``: plain tensor
    attributes of it or its submodules, tensors in list and dict attributes (hyperparameters
    too), and the tensors of modules and metrics held in plain lists and dicts."""
    from lightning.pytorch import LightningModule

    parameters = {id(t) for t in root.parameters()}  # an alias of one: .to() keeps the object
    modules = {id(m) for m in root.modules()}
    skip = set(vars(nn.Module()))  # torch's and Lightning's own attributes
    if isinstance(root, LightningModule):  # (Lightning moves `example_input_array` itself)
        skip |= set(vars(LightningModule())) | {"_hparams_initial"}
    found: dict[int, tuple[Tensor, LeftBehind]] = {}

    def walk(value: Any, path: str, depth: int) -> None:
        if isinstance(value, Tensor) and id(value) not in parameters:
            found[id(value)] = (value, LeftBehind(path, "a tensor", tensor_fix(path)))
        elif isinstance(value, nn.Module) and id(value) not in modules:
            what = f"a {type(value).__name__} in a plain list or dict"
            fix = "keep it in an nn.ModuleList or nn.ModuleDict (metrics: a MetricCollection)"
            states = value.metric_state.values() if isinstance(value, Metric) else ()
            for tensor in [*value.parameters(), *value.buffers(), *states]:
                if isinstance(tensor, Tensor):
                    found[id(tensor)] = (tensor, LeftBehind(path, what, fix))
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
    return found


def tensor_fix(path: str) -> str:
    """The fixes for a tensor at ``path`` (an attribute, an item of one, a hyperparameter)."""
    name = re.findall(r"[A-Za-z_]\w*", path)[-1]  # "total", "history", "w" of "hparams['w']"
    moved = f"or `.to(self.device)` where it is used (`self.{path}.to(self.device)`)"
    if path.startswith("hparams["):
        return (
            f'register it where it is made, `self.register_buffer("{name}", ...)`, and use '
            f"`self.{name}`, {moved}"
        )
    if "[" in path:
        return (
            f'one tensor registered where it is made (`self.register_buffer("{name}", '
            f"torch.stack(...))`; nn.ParameterList if trained), {moved}"
        )
    return (
        f'`self.register_buffer("{name}", ...)` where it is made, in __init__ or setup '
        "(nn.Parameter if trained, a torchmetrics metric such as SumMetric for a running "
        f"total), {moved}"
    )


class DeviceWatch(TorchFunctionMode):
    """A torch function mode, entered around a step: records every operation where tensors of
    the module met others on another device (``problems``, a line each), and finishes it."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module_name = type(module).__name__
        device = getattr(module, "device", None)  # a LightningModule's, moved with it
        if not isinstance(device, torch.device):
            device = next((t.device for t in module.parameters()), torch.device("cpu"))
        self.device = device
        self.left = left_behind(module)
        self.derived: dict[int, tuple[Tensor, LeftBehind]] = {}  # computed from those
        self.problems: dict[str, str] = {}  # a line per tensor, by what it is

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        tensors = [t for t in flat((args, kwargs)) if isinstance(t, Tensor)]
        try:
            result = func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as error:
            if self.device.type == "meta" and name in _ON_META and "meta" in str(error).lower():
                return _ON_META[name](*args, **kwargs)  # what needs data, which `meta` has not
            odd = [t for t in tensors if t.device != self.device]
            if not (odd and _ABOUT_DEVICES.search(str(error)) and self.record(name, odd)):
                raise
            # Finished with every tensor on the module's device: each process then reaches the
            # guard's stop at the same point (one that raised here would leave the others waiting).
            return func(*moved(args, self.device), **moved(kwargs, self.device))
        behind = self.from_left_behind(tensors)
        meets = any(t.device == self.device for t in tensors)  # the module's own tensors
        if behind and meets and self.device.type == "meta" and name not in _ACROSS_DEVICES:
            # torch takes a 0-dim CPU tensor as an input anywhere, not as what is written to
            in_place = name.startswith("__i") or (name.endswith("_") and not name.startswith("_"))
            target = args[0] if in_place and args else None
            self.record(
                name, [t for t in behind if t.dim() > 0 or t.device.type != "cpu" or t is target]
            )
        origin = self.known(behind[0]) if behind else None
        if origin is not None:  # what is computed from a tensor left behind stays behind
            for out in flat(result):
                if isinstance(out, Tensor) and out.device == behind[0].device:
                    self.derived[id(out)] = (out, origin[0])
        return result

    def from_left_behind(self, tensors: list[Tensor]) -> list[Tensor]:
        return [t for t in tensors if t.device != self.device and self.known(t) is not None]

    def known(self, tensor: Tensor) -> tuple[LeftBehind, bool] | None:
        """The tensor left behind that ``tensor`` is or was computed from (and which)."""
        for table, derived in ((self.left, False), (self.derived, True)):
            if (entry := table.get(id(tensor))) is not None and entry[0] is tensor:
                return entry[1], derived
        return None

    def record(self, operation: str, odd: list[Tensor]) -> bool:
        """A line for each of ``odd`` that can be at fault; whether there was one."""
        where = f"`{operation}` at {teams_line()}"
        found = False
        for tensor in odd:
            if (known := self.known(tensor)) is not None:
                behind, derived = known
                what = f"`{behind.path}` ({behind.what}, on {tensor.device})"
                if derived:
                    what = f"a tensor on {tensor.device} computed from `{behind.path}`"
                self.problems.setdefault(behind.path, f"{what}, in {where}: {behind.fix}")
                found = True
            elif tensor.dim() > 0 or tensor.device.type != "cpu":  # torch takes CPU scalars
                self.problems.setdefault(
                    where,
                    f"a tensor on {tensor.device} made in the step, in {where}: make it on the "
                    "model's device (`device=self.device`, `torch.zeros_like(x)`), or "
                    "`.to(self.device)`",
                )
                found = True
        return found

    def error(self, step: str) -> DevicePlacementError:
        return DevicePlacementError(
            f"{self.module_name}'s {step} met tensors that did not follow the model to "
            f"{self.device}: Lightning moves only parameters, buffers and registered "
            "submodules, and torch computes on one device at a time. Fix:\n"
            + "\n".join(f"  - {line}" for line in self.problems.values())
        )


@contextlib.contextmanager
def watch_devices(module: nn.Module, step: str = "step") -> Iterator[DeviceWatch]:
    """Watch what runs inside (a step of ``module``); raise `DevicePlacementError` at the end,
    naming every tensor that met the module's on another device."""
    watch = DeviceWatch(module)
    with watch:
        yield watch
    if watch.problems:
        raise watch.error(step)


def flat(value: Any) -> Iterator[Any]:
    """The leaves of nested lists, tuples and dicts."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from flat(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from flat(item)
    else:
        yield value


def moved(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor on ``device`` (a tensor without data, on ``meta``: zeros)."""
    if isinstance(value, Tensor) and value.device != device:
        try:
            return value.to(device)
        except (RuntimeError, NotImplementedError):
            return torch.zeros(value.shape, dtype=value.dtype, device=device)
    if isinstance(value, (list, tuple)):
        return type(value)(moved(v, device) for v in value)
    if isinstance(value, dict):
        return {k: moved(v, device) for k, v in value.items()}
    return value


def teams_line() -> str:
    """``file:line (function)`` of the innermost frame in the team's code (not a library's,
    not the machinery's), relative to the working directory where it is below it."""
    frame = inspect.currentframe()
    while frame is not None:
        path = os.path.realpath(frame.f_code.co_filename)
        if not (
            path.startswith((_HERE, *_LIBRARIES))
            or frame.f_code.co_filename.startswith("<")
            or {"site-packages", "dist-packages"} & set(path.split(os.sep))
        ):
            shown = os.path.relpath(path) if path.startswith(os.getcwd()) else path
            return f"{shown}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "an unknown line"
