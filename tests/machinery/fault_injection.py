"""Test-only callbacks that put a real training run in a known state, added from the command line.

`train.py` runs from the repository root, so `tests.machinery.fault_injection.X` is importable as a
`_target_`: e.g. `+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep
+callbacks.pause.step=33 +callbacks.pause.marker=/tmp/paused`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from my_project.machinery.reliability import signals


class PauseAtStep(Callback):
    """Pause at a known point of a real run, write ``marker`` and wait to be signalled.

    ``when``: "train" after training step ``step``; "validation" in the validation that runs at
    step ``step`` (after its second batch); "test" after the first test batch; "train_end"
    when training has finished, before the test starts. The test signals the process only once
    the marker exists; the pause ends when a stop signal arrives (or Lightning's stop flag is
    set), as it would after a step. Pauses once: a run resumed with the same overrides
    (``resume=``) finds the marker and goes on. Under DDP only the process of rank 0 pauses
    (the others wait for it in their next collective), and the marker holds its pid.
    """

    def __init__(
        self,
        step: int = -1,
        marker: str = "paused",
        when: str = "train",
        in_validation: bool = False,
        timeout: float = 120.0,
    ) -> None:
        self.step, self.marker, self.timeout = step, Path(marker), timeout
        self.when = "validation" if in_validation else when

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.when == "train" and trainer.global_step == self.step:
            self._pause(trainer, batch_idx)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.when == "validation" and trainer.global_step == self.step and batch_idx == 1:
            self._pause(trainer, batch_idx)

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.when == "test" and batch_idx == 0:
            self._pause(trainer, batch_idx)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.when == "train_end":
            self._pause(trainer, -1)

    def _pause(self, trainer: Trainer, batch_idx: int) -> None:
        if self.marker.exists() or trainer.global_rank != 0:  # resumed, or not the one to pause
            return
        self.marker.write_text(f"{os.getpid()} {trainer.current_epoch} {batch_idx}\n")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and not (
            trainer.received_sigterm or signals.requested_signal()
        ):
            time.sleep(0.05)


class PoisonWeightsAtStep(Callback):
    """Before training step ``step`` + 1, fill the first weight with NaN: that step's loss is NaN."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == self.step:
            with torch.no_grad():
                next(pl_module.parameters()).fill_(float("nan"))
