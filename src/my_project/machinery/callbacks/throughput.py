"""Throughput of any module: Lightning's ``ThroughputMonitor``, its batch sizes found by
Lightning's own ``extract_batch_size`` (any tensor, list, tuple or dict batch), and
``flops_per_batch`` set on the module where it has an ``example_input_array``: one sample's
forward FLOPs, measured once (Lightning's ``measure_flops``, eval mode, no gradients), times
three in training (backward: two products for each of the forward's). Lightning logs the rates
(``train/device/samples_per_sec``, ...) to every logger of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.utilities.data import extract_batch_size


class Throughput(ThroughputMonitor):
    """``ThroughputMonitor`` for any module (see the module docstring). ``window_size``: the
    batches Lightning's logged rates average over (its default, 100, logs nothing in a run of
    fewer batches)."""

    def __init__(self, window_size: int = 10, **kwargs: Any) -> None:
        super().__init__(batch_size_fn=extract_batch_size, window_size=window_size, **kwargs)
        self.forward_flops: float | None = None  # per sample, measured at the first setup
        self._measured = False

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if not self._measured:
            self.forward_flops, self._measured = forward_flops_per_sample(pl_module), True
        if self.forward_flops is None and not hasattr(pl_module, "flops_per_batch"):
            setattr(pl_module, "flops_per_batch", None)  # noqa: B010 - no FLOPs, no warning

    def _flops(self, pl_module: LightningModule, batch: Any, per_forward: int) -> None:
        if self.forward_flops is not None:  # read by Lightning's ThroughputMonitor
            flops = int(self.forward_flops * per_forward * extract_batch_size(batch))
            setattr(pl_module, "flops_per_batch", flops)  # noqa: B010 - not a module attribute

    def on_train_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._flops(module, batch, 3)

    def on_validation_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._flops(module, batch, 1)

    def on_test_batch_start(self, trainer: Trainer, module: Any, batch: Any, *_: Any) -> None:
        self._flops(module, batch, 1)


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
    count = extract_batch_size(example)
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
