"""`LeanSteps`: Lightning's per-step bookkeeping made cheap, for any LightningModule.

Around each training step Lightning does more bookkeeping than a small model does computing
(``python -m my_project.machinery.bench`` measures it against a hand-written loop). This
callback removes the avoidable part without touching the team's module: four patches to
Lightning that change no result, put in place when a Trainer starts running and taken out when
it stops. Lightning has no switch for any of them, hence patches; each one is a few lines and
says what it replaces (checked against Lightning 2.4-2.6, the versions pyproject.toml allows).

1. ``self.log`` moves the value it stores to the logged value's device on every call
   (``_ResultMetric.to`` walks and deep-copies its metadata): ~0.2 ms a value. Skipped when
   everything is already on that device.
2. Every hook is dispatched to every callback, whether it implements the hook or not (with a
   profiler context and a formatted name each time). A hook no callback implements is skipped.
3. Lightning sets ``module._current_fx_name`` around every hook call, through
   ``nn.Module.__setattr__``'s checks of parameters, buffers and submodules. It is a plain
   attribute: it is set directly.
4. Lightning reads ``training_step``'s signature on every batch (``inspect``): each step
   method of the module gets its signature stored on it (PEP 362), which ``inspect`` returns
   as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer import call
from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultMetric
from torch import Tensor, nn
from torchmetrics import Metric

from ..patching import Patch

STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")


class LeanSteps(Callback):
    """Puts the patches in place while a Trainer runs (any stage), for any module."""

    def __init__(self) -> None:
        self._active = False

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        precompute_signatures(pl_module)
        if not self._active:
            for patch in PATCHES:
                patch.enter()
            self._active = True

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._leave()

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        self._leave()

    def _leave(self) -> None:
        if self._active:
            for patch in PATCHES:
                patch.exit()
            self._active = False


def precompute_signatures(module: LightningModule) -> None:
    """Store each step method's signature on its function (patch 4)."""
    for name in STEP_METHODS:
        function = getattr(type(module), name, None)
        if inspect.isfunction(function) and "__signature__" not in vars(function):
            function.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]


# -- the patches ---------------------------------------------------------------------------


def _result_metric_to(original: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 1: `_ResultMetric.to(device)` returns at once when nothing would move."""

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and _all_on(vars(self).values(), args[0]):
            return self
        return original(self, *args, **kwargs)

    return to


def _all_on(values: Any, device: Any) -> bool:
    device = torch.device(device)
    for value in values:
        if isinstance(value, (Tensor, Metric)) and value.device != device:
            return False
    return True


def _callback_hooks(original: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 2: skip a hook that no callback implements."""
    # (callbacks list, its length, hook) -> whether any implements it; the list is kept, so
    # its id cannot be reused by another list while the patch is in place.
    implemented: dict[tuple[int, int, str], tuple[list[Callback], bool]] = {}

    def call_callback_hooks(trainer: Any, hook_name: str, *args: Any, **kwargs: Any) -> Any:
        callbacks = trainer.callbacks
        key = (id(callbacks), len(callbacks), hook_name)
        if key not in implemented:
            implemented[key] = (callbacks, any(_implements(cb, hook_name) for cb in callbacks))
        if implemented[key][1]:
            return original(trainer, hook_name, *args, **kwargs)
        return None

    return call_callback_hooks


def _implements(callback: Callback, hook_name: str) -> bool:
    """The callback's hook is not `Callback`'s own no-op."""
    if hook_name in vars(callback):
        return True
    return getattr(type(callback), hook_name, None) is not getattr(Callback, hook_name, None)


def _module_setattr(original: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 3: `_current_fx_name` bypasses `nn.Module.__setattr__`."""

    def __setattr__(self: nn.Module, name: str, value: Any) -> None:
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            original(self, name, value)

    return __setattr__


PATCHES = (
    Patch(_ResultMetric, "to", _result_metric_to),
    Patch(call, "_call_callback_hooks", _callback_hooks),
    Patch(LightningModule, "__setattr__", _module_setattr),
)
