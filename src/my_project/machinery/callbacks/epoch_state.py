"""`PartialEpochState`: a run resumed mid-epoch reports the same epoch metrics as one that
never stopped, for any module.

An epoch-level metric is a sum kept while the epoch runs, and a mid-epoch checkpoint holds
neither kind of sum:

- torchmetrics metrics keep theirs in states that are not saved unless made persistent (and
  under DDP each process has its own until ``compute``);
- ``self.log(value, on_epoch=True)`` keeps its own in Lightning's result collection, which
  Lightning does not checkpoint at all.

Without them, the resumed epoch's ``train_loss_epoch`` or ``train_acc`` counts only the
batches after the resume. This callback saves both, per process, in mid-epoch checkpoints
(checkpoints at an epoch's end need none: the next epoch starts from zero) and puts them back
when the resumed training starts: the metrics' states at once, the logged sums into the first
value logged again under the same name (Lightning creates its entry only then). Nothing of it
changes a run that is not resumed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultCollection
from torch import Tensor
from torchmetrics import Metric

from ..patching import Patch
from ..reliability.per_rank import gather_from_ranks, own_entry


class PartialEpochState(Callback):
    def __init__(self) -> None:
        self._pending_ranks: list[Any] | None = None  # loaded from a checkpoint
        self._merging: Trainer | None = None  # the trainer whose logged sums are going back

    def state_dict(self) -> dict[str, Any]:
        return {}  # filled in on_save_checkpoint, where the trainer is at hand

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        mid_epoch = not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        mine = (
            {"metrics": metric_states(pl_module), "logged": logged_sums(trainer)}
            if mid_epoch
            else None
        )
        ranks = gather_from_ranks(mine)  # every process saves; rank 0 writes them all
        checkpoint.setdefault("callbacks", {})[self.state_key] = {"ranks": ranks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending_ranks = state_dict.get("ranks") or []

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        ranks, self._pending_ranks = self._pending_ranks, None
        saved = own_entry(ranks, trainer.global_rank, trainer.world_size) if ranks else None
        if saved is None:  # an epoch-end checkpoint, or another number of processes
            return
        restore_metric_states(pl_module, saved["metrics"])
        if saved["logged"]:
            _MERGE.enter()
            _merging[id(trainer.fit_loop.epoch_loop._results)] = dict(saved["logged"])
            self._merging = trainer

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._stop_merging(trainer)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, error: BaseException
    ) -> None:
        self._stop_merging(trainer)

    def _stop_merging(self, trainer: Trainer) -> None:
        if self._merging is trainer:
            _merging.pop(id(trainer.fit_loop.epoch_loop._results), None)
            _MERGE.exit()
            self._merging = None


def metric_states(module: LightningModule) -> dict[str, dict[str, Any]]:
    """Every torchmetrics metric's states, on the CPU, by the metric's name in the module."""
    return {
        name: {state: _to_cpu(getattr(metric, state)) for state in metric._defaults}
        for name, metric in module.named_modules()
        if isinstance(metric, Metric)
    }


def restore_metric_states(module: LightningModule, states: dict[str, dict[str, Any]]) -> None:
    metrics = dict(module.named_modules())
    for name, values in states.items():
        metric = metrics.get(name)
        if isinstance(metric, Metric):
            for state, value in values.items():
                setattr(metric, state, _to(value, metric.device))


def logged_sums(trainer: Trainer) -> dict[str, dict[str, Tensor]]:
    """The running sums of the values this epoch's ``self.log(..., on_epoch=True)`` calls."""
    sums = {}
    for key, result in trainer.fit_loop.epoch_loop._results.items():
        if result.is_tensor and result.meta.on_epoch and not result.has_reset:
            sums[key] = {"value": _to_cpu(result.value)}
            if result.meta.is_mean_reduction:
                sums[key]["cumulated_batch_size"] = _to_cpu(result.cumulated_batch_size)
    return sums


# -- putting the logged sums back: into the entry Lightning makes at the first log call -----

_merging: dict[int, dict[str, dict[str, Tensor]]] = {}


def _merge_pending(original: Callable[..., Any]) -> Callable[..., Any]:
    def update_metrics(self: _ResultCollection, key: str, value: Any, batch_size: int) -> Any:
        pending = _merging.get(id(self))
        saved = pending.pop(key, None) if pending else None
        if saved is not None:
            result = self[key]
            device = result.value.device
            if result.meta.is_mean_reduction or result.meta.is_sum_reduction:
                result.value = result.value + saved["value"].to(device)
            else:  # max or min
                result.value = result.meta.reduce_fx(result.value, saved["value"].to(device))
            if "cumulated_batch_size" in saved:
                count = saved["cumulated_batch_size"].to(device)
                result.cumulated_batch_size = result.cumulated_batch_size + count
        return original(self, key, value, batch_size)

    return update_metrics


_MERGE = Patch(_ResultCollection, "update_metrics", _merge_pending)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    return value


def _to(value: Any, device: torch.device) -> Any:
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to(item, device) for item in value]
    return value
