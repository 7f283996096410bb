"""Throughput of any module: Lightning's ``ThroughputMonitor`` with a ``batch_size_fn`` for any
batch, and ``flops_per_batch`` set on the module where it has an ``example_input_array``: one
sample's forward FLOPs, measured once (Lightning's ``measure_flops``, eval mode, no gradients),
times three in training (backward: two products for each of the forward's). The run's averages
end its output (`record.finish`, :meth:`Throughput.summary`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ThroughputMonitor


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
        self.forward_flops: float | None = None  # per sample, measured at the first setup
        self._measured = False
        self.rates: dict[str, dict[str, float]] = {}  # stage: samples/s (and FLOP/s) overall
        self._counts: dict[str, list[float]] = {}  # stage: [start, samples, paused seconds]

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if not self._measured:
            self.forward_flops, self._measured = forward_flops_per_sample(pl_module), True
        if self.forward_flops is None and not hasattr(pl_module, "flops_per_batch"):
            setattr(pl_module, "flops_per_batch", None)  # noqa: B010 - no FLOPs, no warning

    def _count(self, trainer: Trainer, pl_module: LightningModule, batch: Any, stage: str) -> None:
        per_forward = 3 if stage == "training" else 1
        if self.forward_flops is not None:  # read by Lightning's ThroughputMonitor
            flops = int(self.forward_flops * per_forward * samples_in(batch))
            setattr(pl_module, "flops_per_batch", flops)  # noqa: B010 - not a module attribute
        if stage in self._counts:
            self._counts[stage][1] += samples_in(batch) * trainer.world_size

    def on_train_start(self, trainer: Trainer, *args: Any) -> None:
        super().on_train_start(trainer, *args)
        self._counts["training"] = [time.perf_counter(), 0, 0.0]

    def on_train_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._count(trainer, module, batch, "training")

    def on_validation_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._count(trainer, module, batch, "validation")

    def on_test_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._count(trainer, module, batch, "test")

    def on_validation_start(self, trainer: Trainer, *args: Any) -> None:
        super().on_validation_start(trainer, *args)
        self._paused = time.perf_counter()  # training's time leaves validation out

    def on_validation_end(self, trainer: Trainer, *args: Any) -> None:
        super().on_validation_end(trainer, *args)
        if "training" in self._counts:
            self._counts["training"][2] += time.perf_counter() - self._paused

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record("training", 3)

    def on_test_start(self, trainer: Trainer, *args: Any) -> None:
        super().on_test_start(trainer, *args)
        self._counts["test"] = [time.perf_counter(), 0, 0.0]

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record("test", 1)

    def _record(self, stage: str, per_forward: int) -> None:
        start, samples, paused = self._counts.pop(stage, (0.0, 0, 0.0))
        seconds = time.perf_counter() - start - paused
        if samples and seconds > 0:
            rates = self.rates[stage] = {"samples_per_sec": samples / seconds}
            if self.forward_flops is not None:
                rates["flops_per_sec"] = rates["samples_per_sec"] * self.forward_flops * per_forward

    def summary(self) -> str | None:
        """``Throughput: training 41,234 samples/s (0.123 GFLOP/s); test ...``, or None."""
        parts = []
        for stage, rates in self.rates.items():
            flops = rates.get("flops_per_sec")
            extra = f" ({flops / 1e9:.3g} GFLOP/s)" if flops is not None else ""
            parts.append(f"{stage} {rates['samples_per_sec']:,.0f} samples/s{extra}")
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
