"""Counting the calls that make the host wait for the device (or would, on a GPU) during the
training steps of a real Trainer run: what a lean step must not do."""

from __future__ import annotations

import collections
from typing import Any

import torch
from lightning.pytorch import Callback, Trainer
from torch.overrides import TorchFunctionMode

# Calls that make the host wait for the device (or would, on a GPU): reading a value out of a
# tensor, or an op whose output size depends on the data.
HOST_SYNCS = {
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.cpu,
    torch.Tensor.numpy,
    torch.Tensor.__bool__,
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__index__,
    torch.Tensor.__format__,
    torch.Tensor.__repr__,
    torch.equal,
    torch.unique,
    torch.Tensor.unique,
    torch.nonzero,
    torch.Tensor.nonzero,
    torch.masked_select,
    torch.Tensor.masked_select,
}


class HostSyncCounter(TorchFunctionMode):
    """Counts host-syncing tensor calls while active (every torch call passes through here)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()
        self.ignored: set[int] = set()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in HOST_SYNCS and not (args and id(args[0]) in self.ignored):
            self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


class CountHostSyncsInSteps(Callback):
    """Activates the counter from the start to the end of each training batch (step,
    backward, optimizer step and every hook in between), after the first batch."""

    def __init__(self) -> None:
        self.counter = HostSyncCounter()
        self.steps = 0

    def on_train_batch_start(self, trainer: Trainer, pl_module: Any, batch: Any, idx: int) -> None:
        if idx >= 1:
            # An optimizer's step counter lives on the host by design: reading it is no sync.
            self.counter.ignored = {
                id(state["step"])
                for optimizer in trainer.optimizers
                for state in optimizer.state.values()
                if "step" in state
            }
            self.counter.__enter__()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: Any, out: Any, b: Any, idx: int
    ) -> None:
        if idx >= 1:
            self.counter.__exit__(None, None, None)
            self.steps += 1
