"""Writes the learning curves (after fit) and the test confusion matrix (after test) as PNGs,
and logs them as images to every logger that takes images (wandb)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn

from ..plotting import plot_confusion_matrix, plot_learning_curves

CURVE_KEYS = ("train/loss", "train/acc", "val/loss", "val/acc")


def log_image(trainer: Trainer, key: str, path: Path) -> None:
    """Send a PNG to the loggers that have Lightning's ``log_image`` (wandb; CSV has none)."""
    for logger in trainer.loggers:
        log = getattr(logger, "log_image", None)
        if callable(log):
            log(key=key, images=[str(path)])


class PlotCallback(Callback):
    """Keeps a per-epoch history of the epoch-level metrics and plots it.

    Validation metrics are recorded when validation ends. Lightning calls callbacks'
    ``on_train_epoch_end`` before the module's, where the train metrics are logged, so those
    are recorded when the next epoch starts, at fit end, or when an epoch-end checkpoint is
    written (a run resumed from it starts without them). The history is part of the
    checkpoint, so a resumed run plots the whole run.
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

    def _record(self, trainer: Trainer, epoch: int, prefix: str) -> None:
        values = {
            k: float(v)
            for k, v in trainer.callback_metrics.items()
            if k in CURVE_KEYS and k.startswith(prefix)
        }
        if not values or epoch < 0:
            return
        row = next((r for r in self.history if r["epoch"] == epoch), None)
        if row is None:
            row = {"epoch": epoch}
            self.history.append(row)
            self.history.sort(key=lambda r: r["epoch"])
        row.update(values)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING:
            self._record(trainer, trainer.current_epoch, "val/")

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1, "train/")

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # At an epoch-end save the epoch counts as processed but not completed, and its train
        # metrics are logged: record them now, and put the completed history in the checkpoint.
        processed = getattr(trainer.fit_loop.epoch_progress.current, "processed", 0)
        if processed > trainer.current_epoch:
            self._record(trainer, trainer.current_epoch, "train/")
            if self.state_key in checkpoint.get("callbacks", {}):
                checkpoint["callbacks"][self.state_key] = self.state_dict()

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1, "train/")
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
        return {"history": [dict(row) for row in self.history]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))
