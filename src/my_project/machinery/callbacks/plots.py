"""Plots of every run, for any module: learning curves after fit; after test, a confusion
matrix (classification) or predicted against true values (regression). Written as PNGs into
the run directory and logged to every logger that takes images (wandb).

The task plot needs the module's outputs on the test set. A docs-style ``test_step`` returns
nothing, so after each test batch ``(inputs, targets, ...)`` this callback runs the module's
``forward`` on the inputs once more (without gradients): classification when the outputs are
one score per class and the targets class indices, or one value a sample and 0/1 targets (a
binary classifier with one logit: a 2x2 confusion matrix, see `tasks.py`); regression when
both are one number per sample otherwise. Anything else (a ``forward`` that needs more than the
inputs, dict batches) gets the learning curves only, and a line in the log saying why.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor

from ..lightning_compat import logged_entries, logged_name, training_results, validation_results
from ..plotting import (
    confusion_matrix,
    plot_confusion_matrix,
    plot_learning_curves,
    plot_predicted_vs_true,
    split_metric_name,
)
from ..reliability.per_rank import gather_from_ranks
from ..tasks import binary_probabilities

log = logging.getLogger(__name__)


def log_image(trainer: Trainer, key: str, path: Path) -> None:
    """Send a PNG to the loggers that have Lightning's ``log_image`` (wandb; CSV has none)."""
    for logger in trainer.loggers:
        send = getattr(logger, "log_image", None)
        if callable(send):
            send(key=key, images=[str(path)])


class PlotCallback(Callback):
    """Keeps a per-epoch history of the epoch-level metrics, plots it, and plots the test set.

    Every value the module logs in training or validation is recorded once an epoch: its
    epoch value (``on_epoch``, Lightning's mean or sum), or, for a value logged per step only
    (``self.log_dict({"g_loss": ...})`` in a GAN's step), the mean of its steps, kept here
    (a sum on the device, no host sync). A name with a stage (``train_loss``, ``val/acc``)
    goes into that stage's line; one without (``g_loss``, ``lr``) into the stage whose hooks
    logged it. Validation metrics are recorded when validation ends. Lightning calls
    callbacks' ``on_train_epoch_end`` before the module's, where epoch-level train metrics are
    often logged, so those are recorded when the next epoch starts, at fit end, or when an
    epoch-end checkpoint is written. The history (and the step sums of the epoch under way)
    is part of the checkpoint, so a resumed run plots the whole run.
    """

    def __init__(
        self,
        dirpath: str,
        curves_name: str = "learning_curves.png",
        confusion_name: str = "confusion_matrix.png",
        predictions_name: str = "predictions.png",
        max_test_samples: int = 100_000,
    ) -> None:
        self.dirpath = Path(dirpath)
        self.curves_name = curves_name
        self.confusion_name = confusion_name
        self.predictions_name = predictions_name
        self.max_test_samples = max_test_samples
        self.history: list[dict[str, float]] = []
        self._step_sums: dict[str, tuple[Tensor, int]] = {}  # per-step values of this epoch
        self._last_seen: dict[str, Tensor] = {}
        self._outputs: list[Tensor] = []
        self._targets: list[Tensor] = []
        self._skip_reason: str | None = None

    # -- learning curves -----------------------------------------------------------------
    def _record(self, trainer: Trainer, epoch: int, stage: str) -> None:
        if epoch < 0:
            return
        results = validation_results(trainer) if stage == "val" else training_results(trainer)
        metrics = trainer.callback_metrics
        values = {}
        for entry in logged_entries(results):
            name = logged_name(entry)
            value: Any = metrics.get(name) if entry.meta.on_epoch else None
            if value is None and stage == "train" and name in self._step_sums:
                total, count = self._step_sums[name]
                value = total / count
            if not isinstance(value, Tensor) or value.numel() != 1:
                continue
            parts = split_metric_name(name)
            if parts is not None and parts[0] == "test":
                continue
            values[name if parts is not None else f"{stage}/{name}"] = float(value)
        if not values:
            return
        row = next((r for r in self.history if r["epoch"] == epoch), None)
        if row is None:
            row = {"epoch": epoch}
            self.history.append(row)
            self.history.sort(key=lambda r: r["epoch"])
        row.update(values)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        """Sum the values logged per step only (a tensor add on their device; no sync)."""
        for entry in logged_entries(training_results(trainer)):
            per_step = entry.is_tensor and not entry.meta.on_epoch and not entry.has_reset
            value = entry.value if per_step else None
            name = logged_name(entry)
            if not isinstance(value, Tensor) or value is self._last_seen.get(name):
                continue  # not a per-step value, or not logged (again) at this step
            self._last_seen[name] = value
            total, count = self._step_sums.get(name, (None, 0))
            value = value.detach().reshape(())
            self._step_sums[name] = (value if total is None else total.to(value) + value, count + 1)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING:
            self._record(trainer, trainer.current_epoch, "val")

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1, "train")
        self._step_sums, self._last_seen = {}, {}

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # At an epoch-end save the epoch counts as processed but not completed, and its train
        # metrics are logged: record them now, and put the completed history in the checkpoint.
        processed = getattr(trainer.fit_loop.epoch_progress.current, "processed", 0)
        if processed > trainer.current_epoch:
            self._record(trainer, trainer.current_epoch, "train")
            if self.state_key in checkpoint.get("callbacks", {}):
                checkpoint["callbacks"][self.state_key] = self.state_dict()

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1, "train")
        if not trainer.is_global_zero or not self.history:
            return
        monitor, mode = _monitored(trainer)
        self.dirpath.mkdir(parents=True, exist_ok=True)
        path = plot_learning_curves(self.history, self.dirpath / self.curves_name, monitor, mode)
        if path is not None:
            log_image(trainer, "plots/learning_curves", path)

    # -- the test set: confusion matrix or predicted against true -------------------------
    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._outputs, self._targets, self._skip_reason = [], [], None

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._skip_reason is not None or dataloader_idx:
            return
        if sum(len(t) for t in self._targets) >= self.max_test_samples:
            return
        if not (isinstance(batch, (list, tuple)) and len(batch) >= 2):
            self._skip_reason = "test batches are not (inputs, targets, ...)"
            return
        inputs, targets = batch[0], batch[1]
        try:
            with torch.no_grad():
                predicted = pl_module(inputs)
        except Exception as error:  # a forward that takes more than the inputs
            self._skip_reason = f"forward(inputs) failed ({type(error).__name__}: {error})"
            return
        if not (isinstance(predicted, Tensor) and isinstance(targets, Tensor)):
            self._skip_reason = "forward(inputs) or the targets are not tensors"
            return
        self._outputs.append(predicted.detach().float().cpu())
        self._targets.append(targets.detach().cpu())

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking:
            return
        # Every rank takes part in the gather (a collective), whatever it collected.
        gathered = gather_from_ranks((self._outputs, self._targets, self._skip_reason))
        if not trainer.is_global_zero:
            return
        reasons = [reason for _, _, reason in gathered if reason]
        outputs = [t for outs, _, _ in gathered for t in outs]
        targets = [t for _, tgts, _ in gathered for t in tgts]
        if reasons or not outputs:
            log.info(f"Plots: no test-set plot ({reasons[0] if reasons else 'no test batches'}).")
            return
        self._plot_test(trainer, torch.cat(outputs), torch.cat(targets))

    def _plot_test(self, trainer: Trainer, outputs: Tensor, targets: Tensor) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        per_sample = outputs.reshape(len(outputs), -1)
        probabilities = binary_probabilities(outputs, targets)
        if probabilities is not None:  # one logit (or probability) and 0/1 labels
            matrix = confusion_matrix(
                (probabilities > 0.5).long().numpy(), targets.long().numpy(), 2
            )
            path = plot_confusion_matrix(matrix, self.dirpath / self.confusion_name)
            log_image(trainer, "plots/confusion_matrix", path)
        elif per_sample.shape[1] > 1 and not targets.is_floating_point() and targets.dim() == 1:
            classes = per_sample.shape[1]
            matrix = confusion_matrix(
                per_sample.argmax(dim=1).numpy(), targets.clamp(0, classes - 1).numpy(), classes
            )
            path = plot_confusion_matrix(matrix, self.dirpath / self.confusion_name)
            log_image(trainer, "plots/confusion_matrix", path)
        elif per_sample.shape[1] == 1 and targets.numel() == len(outputs):
            path = plot_predicted_vs_true(
                per_sample[:, 0].numpy(),
                targets.float().numpy(),
                self.dirpath / self.predictions_name,
            )
            log_image(trainer, "plots/predictions", path)
        else:
            log.info(
                f"Plots: no test-set plot for outputs of shape {tuple(outputs.shape)} and targets "
                f"of shape {tuple(targets.shape)} (neither class scores nor one value a sample)."
            )

    def state_dict(self) -> dict[str, Any]:
        sums = {k: (total.detach().cpu(), count) for k, (total, count) in self._step_sums.items()}
        return {"history": [dict(row) for row in self.history], "step_sums": sums}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))
        self._step_sums = dict(state_dict.get("step_sums", {}))


def _monitored(trainer: Trainer) -> tuple[str | None, str]:
    """The metric the best-checkpoint callback monitors, and whether higher is better."""
    for callback in trainer.checkpoint_callbacks:
        monitor = getattr(callback, "monitor", None)
        if monitor:
            return str(monitor), str(getattr(callback, "mode", "min"))
    return None, "min"
