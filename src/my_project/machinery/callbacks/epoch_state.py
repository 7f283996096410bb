"""A run resumed mid-epoch reports the same epoch metrics as one that never stopped.

An epoch-level metric is a running sum, and a mid-epoch checkpoint holds none: torchmetrics
keeps its states out of checkpoints (and per process under DDP), Lightning does not checkpoint
the sums of ``self.log(..., on_epoch=True)``. Without them the resumed epoch's ``train_loss``
or ``train_acc`` counts only the batches after the resume. Saved here per process in mid-epoch
checkpoints; put back when the resumed training starts (the metrics' states) and after the
first batch that logs each value again (Lightning makes a logged value's entry only then).
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningModule, Trainer
from torchmetrics import Metric

from .. import lightning_compat as compat
from ..reliability.per_rank import PerRankState


class PartialEpochState(PerRankState):
    """Metric states and logged sums of an epoch a checkpoint splits. A value that a resumed
    batch logs after this callback's ``on_train_batch_end`` (in the module's own hook) gets its
    sum one batch later: its epoch value is then the same to float rounding, not bit-equal."""

    def __init__(self) -> None:
        self._sums: dict[str, Any] = {}

    def collect(self, trainer: Trainer, pl_module: LightningModule) -> Any:
        if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return None  # the next epoch starts from zero
        metrics = {
            name: {key: _cpu(value) for key, value in metric.metric_state.items()}
            for name, metric in pl_module.named_modules()
            if isinstance(metric, Metric)
        }
        return {"metrics": metrics, "logged": compat.epoch_sums(trainer)}

    def restore(self, trainer: Trainer, pl_module: LightningModule, state: Any) -> None:
        modules = dict(pl_module.named_modules())
        for name, values in state["metrics"].items():
            if isinstance(metric := modules.get(name), Metric):
                for key, value in values.items():
                    setattr(metric, key, _to(value, metric.device))
        self._sums = dict(state["logged"])

    def on_train_batch_end(self, trainer: Trainer, *args: Any) -> None:
        if self._sums:
            compat.add_epoch_sums(trainer, self._sums)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._sums = {}


def _cpu(value: Any) -> Any:
    return [_cpu(v) for v in value] if isinstance(value, list) else value.detach().cpu().clone()


def _to(value: Any, device: Any) -> Any:
    return [_to(v, device) for v in value] if isinstance(value, list) else value.to(device)
