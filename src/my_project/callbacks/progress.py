"""A Rich progress bar that redraws at most every ``min_interval`` seconds.

Lightning's own bars redraw after every batch (``RichProgressBar`` also re-reads the metrics
each time): on a small model that is a sizeable share of the step. Here a training batch
that ends less than ``min_interval`` seconds after the last redraw only costs a clock read;
the last batch of an epoch is always drawn. Evaluation bars are left as they are. Lightning
has no time-based option, hence this subclass.
"""

from __future__ import annotations

import time
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import RichProgressBar


class ThrottledProgressBar(RichProgressBar):
    def __init__(self, min_interval: float = 0.25, refresh_rate: int = 10, leave: bool = False):
        super().__init__(refresh_rate=refresh_rate, leave=leave)
        self.min_interval = min_interval
        self._last_draw = 0.0

    def _due(self, batch_idx: int) -> bool:
        now = time.monotonic()
        if now - self._last_draw >= self.min_interval or batch_idx + 1 >= self.total_train_batches:
            self._last_draw = now
            return True
        return False

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._due(batch_idx):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


def progress_bar(
    enabled: bool = True, min_interval: float = 0.25, refresh_rate: int = 10
) -> ThrottledProgressBar | None:
    """The bar, or None when ``trainer.enable_progress_bar=false`` (Lightning rejects both)."""
    return ThrottledProgressBar(min_interval, refresh_rate) if enabled else None
