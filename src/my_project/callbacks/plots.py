"""Writes the learning curves (after fit) and the test confusion matrix (after test) as PNGs,
and logs them as images to every logger that takes images (wandb)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from ..utils.plots import plot_confusion_matrix, plot_learning_curves

CURVE_KEYS = ("train/loss", "train/acc", "val/loss", "val/acc")


def log_image(trainer: Trainer, key: str, path: Path) -> None:
    """Send a PNG to the loggers that have Lightning's ``log_image`` (wandb; CSV has none)."""
    for logger in trainer.loggers:
        log = getattr(logger, "log_image", None)
        if callable(log):
            log(key=key, images=[str(path)])


class PlotCallback(Callback):
    """Keeps a per-epoch history of the epoch-level metrics and plots it.

    Lightning calls callbacks' ``on_train_epoch_end`` before the module's, where the train
    metrics are logged, so an epoch is recorded when the next one starts (and at fit end).
    The history is part of the checkpoint, so a resumed run plots the whole run.
    """

    def __init__(
        self,
        dirpath: str,
        curves_name: str = "learning_curves.png",
        confusion_name: str = "confusion_matrix.png",
    ) -> None:
        self.dirpath = Path(dirpath)
        self.curves_name = curves_name
        self.confusion_name = confusion_name
        self.history: list[dict[str, float]] = []

    def _record(self, trainer: Trainer, epoch: int) -> None:
        row = {k: float(v) for k, v in trainer.callback_metrics.items() if k in CURVE_KEYS}
        if row and not any(r["epoch"] == epoch for r in self.history):
            self.history.append({"epoch": epoch, **row})

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.current_epoch > 0:
            self._record(trainer, trainer.current_epoch - 1)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1)
        if trainer.is_global_zero and self.history:
            self.dirpath.mkdir(parents=True, exist_ok=True)
            path = plot_learning_curves(self.history, self.dirpath / self.curves_name)
            log_image(trainer, "plots/learning_curves", path)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        confusion = getattr(pl_module, "test_confusion", None)
        if confusion is None or trainer.sanity_checking:
            return
        matrix = confusion.compute()  # a collective under DDP: every rank must call it
        if trainer.is_global_zero:
            self.dirpath.mkdir(parents=True, exist_ok=True)
            path = plot_confusion_matrix(matrix.cpu().numpy(), self.dirpath / self.confusion_name)
            log_image(trainer, "plots/confusion_matrix", path)

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))
