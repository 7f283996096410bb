"""Counting the calls that make the host wait for the device (or would, on a GPU) during the
training steps of a real Trainer run: what a lean step must not do."""

from __future__ import annotations

import collections
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
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
    """Counts, per training step after the first, the host syncs of the whole step: fetching the
    batch, every hook of every callback and of the module, the step, backward and optimizer
    step (the training loop's ``advance``, wrapped on this run's loop). ``per_step`` holds each
    step's counts; ``counter.calls`` their sum."""

    def __init__(self) -> None:
        self.counter = HostSyncCounter()
        self.per_step: list[collections.Counter[str]] = []

    @property
    def steps(self) -> int:
        return len(self.per_step)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        loop = trainer.fit_loop.epoch_loop
        advance = loop.advance

        def counted(*args: Any, **kwargs: Any) -> Any:
            if loop.batch_progress.current.completed < 1:  # the first step sets things up
                return advance(*args, **kwargs)
            # An optimizer's step counter lives on the host by design: reading it is no sync.
            self.counter.ignored = {
                id(state["step"])
                for optimizer in trainer.optimizers
                for state in optimizer.state.values()
                if "step" in state
            }
            before = collections.Counter(self.counter.calls)
            with self.counter:
                result = advance(*args, **kwargs)
            self.per_step.append(self.counter.calls - before)
            return result

        loop.advance = counted  # type: ignore[method-assign]
