"""Plots of every run, for any module, as PNGs in the run directory and images in the loggers
that take them: learning curves after fit; after test, a confusion matrix (classification) or
predicted against true values (regression), one per test loader (``confusion_matrix.png``,
then ``confusion_matrix_dataloader_1.png``, ...). A docs-style ``test_step`` returns nothing, so
after each test batch ``(inputs, targets, ...)`` this runs ``forward`` on the inputs again:
class scores against class indices, or one value against 0/1 targets, are a classifier's; one
number a sample otherwise, a regression's. Anything else gets a line in the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor

from ..distributed import gather_from_ranks
from ..lightning_compat import logged_entries, logged_name, training_results, validation_results
from ..plotting import (
    plot_confusion_matrix,
    plot_learning_curves,
    plot_predicted_vs_true,
    split_metric_name,
)
from ..tasks import binary_probabilities

log = logging.getLogger(__name__)


def log_image(trainer: Trainer, key: str, path: Path) -> None:
    """Send a PNG to the loggers that have Lightning's ``log_image`` (wandb; CSV has none)."""
    for logger in trainer.loggers:
        if callable(getattr(logger, "log_image", None)):
            logger.log_image(key=key, images=[str(path)])  # type: ignore[attr-defined]


class PlotCallback(Callback):
    """Keeps a per-epoch history of each scalar logged in training or validation, from
    ``callback_metrics`` (``g_loss`` as ``train/g_loss``; train metrics once the epoch is over),
    plots it, and plots the test set. The history is in the checkpoint: a resume plots it all.
    """

    def __init__(self, dirpath: str, max_test_samples: int = 100_000) -> None:
        self.dirpath = Path(dirpath)
        self.max_test_samples = max_test_samples
        self.history: list[dict[str, float]] = []
        # outputs and targets of each test loader; None once a batch is not a task's
        self._test: dict[int, tuple[list[Tensor], list[Tensor]]] | None = {}

    def _record(self, trainer: Trainer, epoch: int, stage: str) -> None:
        results = validation_results(trainer) if stage == "val" else training_results(trainer)
        values = {}
        names = dict.fromkeys(logged_name(entry) for entry in logged_entries(results))
        for name in names if epoch >= 0 else ():
            value, parts = trainer.callback_metrics.get(name), split_metric_name(name)
            if isinstance(value, Tensor) and value.numel() == 1 and (parts or ("",))[0] != "test":
                values[name if parts is not None else f"{stage}/{name}"] = float(value)
        if values:
            row = next((r for r in self.history if r["epoch"] == epoch), None)
            if row is None:
                row = {"epoch": epoch}
                self.history = sorted([*self.history, row], key=lambda r: r["epoch"])
            row.update(values)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING:
            self._record(trainer, trainer.current_epoch, "val")

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._record(trainer, trainer.current_epoch - 1, "train")

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
        path = self.dirpath / "learning_curves.png"
        if trainer.is_global_zero and plot_learning_curves(self.history, path) is not None:
            log_image(trainer, "plots/learning_curves", path)

    # -- the test set: confusion matrix or predicted against true -------------------------
    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._test = {}

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._test is None:
            return
        kept, targets = self._test.setdefault(dataloader_idx, ([], []))
        if sum(map(len, targets)) >= self.max_test_samples:
            return
        try:
            if not isinstance(batch, (list, tuple)):
                raise TypeError("test batches are not (inputs, targets, ...)")
            with torch.no_grad():
                predicted, target = pl_module(batch[0]).detach(), batch[1].detach()
        except Exception as error:  # a forward that takes more than the inputs, ...
            if trainer.is_global_zero:  # every process finds it: said once
                log.info(f"Plots: no test-set plot ({type(error).__name__}: {error}).")
            self._test = None
            return
        kept.append(predicted.float().cpu())
        targets.append(target.cpu())

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Every rank takes part in the gather (a collective), whatever it collected.
        tests = [test for test in gather_from_ranks(self._test) if test is not None]
        if not trainer.is_global_zero or len(tests) != trainer.world_size:
            return
        loaders = sorted({index for test in tests for index in test})
        for index in loaders:
            outputs = [t for test in tests for t in test.get(index, ([], []))[0]]
            targets = [t for test in tests for t in test.get(index, ([], []))[1]]
            if outputs:
                name = f"_dataloader_{index}" if index else ""
                where = f", loader {index}" if len(loaders) > 1 else ""
                self._plot_test(trainer, torch.cat(outputs), torch.cat(targets), name, where)

    def _plot_test(
        self, trainer: Trainer, outputs: Tensor, targets: Tensor, name: str, where: str
    ) -> None:
        per_sample = outputs.reshape(len(outputs), -1)
        probabilities = binary_probabilities(outputs, targets)
        integers = not targets.is_floating_point() and targets.dim() == 1
        if probabilities is not None:  # one logit (or probability) against 0/1 labels
            predicted, true, count = (probabilities > 0.5).long(), targets.long(), 2
        elif per_sample.shape[1] > 1 and integers:  # class scores against class indices
            count = per_sample.shape[1]
            predicted, true = per_sample.argmax(dim=1), targets.clamp(0, count - 1)
        elif per_sample.shape[1] == 1 and targets.numel() == len(outputs):
            path = self.dirpath / f"predictions{name}.png"
            plot_predicted_vs_true(per_sample[:, 0].numpy(), targets.float().numpy(), path, where)
            log_image(trainer, f"plots/predictions{name}", path)
            return
        else:
            log.info(f"Plots: no test-set plot for outputs {tuple(outputs.shape)}: not a task's.")
            return
        path = self.dirpath / f"confusion_matrix{name}.png"
        plot_confusion_matrix(true.numpy(), predicted.numpy(), count, path, where)
        log_image(trainer, f"plots/confusion_matrix{name}", path)

    def state_dict(self) -> dict[str, Any]:
        return {"history": [dict(row) for row in self.history]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))
