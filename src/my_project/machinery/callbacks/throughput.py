"""Throughput of any module and batch: Lightning's ``ThroughputMonitor``, plus FLOPs and one
closing line.

Lightning's callback needs a function that counts a batch's samples, and a ``flops_per_batch``
attribute on the module for FLOPs (it warns on every run of a module without one). Here the
samples are counted in any batch (the first tensor's length), and where the module has an
``example_input_array`` its forward FLOPs per sample are measured once (torch's FLOP counter,
Lightning's ``measure_flops``, in eval mode and without gradients, so nothing of the run
changes) and given to Lightning for each batch: forward for validation and test, forward and
backward (three times forward, the usual estimate) for training. Lightning logs
``train|val|test/device/samples_per_sec`` (and ``.../flops_per_sec``) to every logger; the
run's averages over all its batches end its output (`record.finish`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.trainer.states import RunningStage

# What a training step costs in FLOPs, as a multiple of the forward pass: the backward pass
# computes two products for each of the forward's (gradients of inputs and of weights).
TRAINING_FLOPS_PER_FORWARD = 3


def samples_in(batch: Any) -> int:
    """The number of samples in a batch: the length of its first tensor (in a tensor, a
    list, a tuple or a dict), else 1."""
    return _first_length(batch) or 1


def _first_length(batch: Any) -> int | None:
    if hasattr(batch, "shape"):
        return int(batch.shape[0]) if len(batch.shape) > 0 else None
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        return next((n for n in map(_first_length, batch) if n), None)
    return None


class Throughput(ThroughputMonitor):
    """``ThroughputMonitor`` for any module (see the module docstring). ``window_size``: the
    batches Lightning's logged rates average over (its default, 100, logs nothing in a run of
    fewer batches)."""

    def __init__(self, window_size: int = 10, **kwargs: Any) -> None:
        super().__init__(batch_size_fn=samples_in, window_size=window_size, **kwargs)
        self._forward_flops: float | None = None  # per sample; None: not measured (yet)
        self._measured = False
        self._world_size = 1
        self.rates: dict[str, dict[str, float]] = {}  # stage: samples/s (and FLOP/s) overall
        # A module without FLOPs is the common case, not a mistake: Lightning's warning goes.
        warnings.filterwarnings("ignore", message=r"When using the `ThroughputMonitor`, you need")

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self._world_size = trainer.world_size

    def _set_flops(self, pl_module: LightningModule, batch: Any, per_forward: int) -> None:
        if not self._measured:
            self._measured = True
            self._forward_flops = forward_flops_per_sample(pl_module)
        if self._forward_flops is not None:  # read by Lightning's ThroughputMonitor
            flops = int(self._forward_flops * per_forward * samples_in(batch))
            setattr(pl_module, "flops_per_batch", flops)  # noqa: B010 (not a module attribute)

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._set_flops(pl_module, batch, TRAINING_FLOPS_PER_FORWARD)

    def on_validation_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._set_flops(pl_module, batch, 1)

    def on_test_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._set_flops(pl_module, batch, 1)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record("training", RunningStage.TRAINING, TRAINING_FLOPS_PER_FORWARD)

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record("test", RunningStage.TESTING, 1)

    def _record(self, name: str, stage: RunningStage, per_forward: int) -> None:
        # Lightning's totals for the stage: its time leaves validation out of training's.
        counter = self._throughputs.get(stage)
        try:
            totals = counter.compute() if counter is not None else None
        except IndexError:  # no batch of this stage ran
            return
        if not totals or totals["time"] <= 0:
            return
        samples_per_second = totals["samples"] * self._world_size / totals["time"]
        rates = {"samples_per_sec": samples_per_second}
        if self._forward_flops is not None:
            rates["flops_per_sec"] = samples_per_second * self._forward_flops * per_forward
        self.rates[name] = rates

    def summary(self) -> str | None:
        """``Throughput: training 41,234 samples/s (0.123 GFLOP/s); test ...``, or None."""
        parts = []
        for name, rates in self.rates.items():
            flops = rates.get("flops_per_sec")
            extra = f" ({flops / 1e9:.3g} GFLOP/s)" if flops is not None else ""
            parts.append(f"{name} {rates['samples_per_sec']:,.0f} samples/s{extra}")
        return f"Throughput: {'; '.join(parts)}." if parts else None


def forward_flops_per_sample(pl_module: LightningModule) -> float | None:
    """FLOPs of one sample's forward pass, from the module's ``example_input_array``; None
    without one (or when the module defines ``flops_per_batch`` itself)."""
    import torch
    from lightning.fabric.utilities.apply_func import move_data_to_device
    from lightning.fabric.utilities.throughput import measure_flops

    example = pl_module.example_input_array
    own = hasattr(type(pl_module), "flops_per_batch") or "flops_per_batch" in vars(pl_module)
    if example is None or own:
        return None
    count = samples_in(example)
    example = move_data_to_device(example, pl_module.device)
    training = pl_module.training
    pl_module.eval()  # no dropout draws, no batch-norm statistics: the run is unchanged
    try:
        with torch.no_grad():
            if isinstance(example, (list, tuple)):
                flops = measure_flops(pl_module, lambda: pl_module(*example))
            elif isinstance(example, Mapping):
                flops = measure_flops(pl_module, lambda: pl_module(**example))
            else:
                flops = measure_flops(pl_module, lambda: pl_module(example))
    finally:
        pl_module.train(training)
    return flops / count if count else None
