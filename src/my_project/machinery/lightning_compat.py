"""Every use of Lightning's private names in the training loop's machinery, in one place.

One patch, `skip_sigterm_broadcast`: Lightning (2.5.2 on) broadcasts rank 0's SIGTERM flag
before every training batch under DDP, a host sync per step (Lightning-AI/pytorch-lightning
#21487); `signals.StopTogether` agrees every N steps instead. Checked against Lightning 2.5.2 to
2.6.6; elsewhere not applied, and tests/machinery/test_lightning_compat.py fails until checked.
The rest reads or sets private state, each tested there; `strategies/ddp.py` overrides private
hooks of Lightning's DDP launcher.
"""

from __future__ import annotations

from typing import Any

import lightning
from lightning.pytorch.strategies.launchers.subprocess_script import (
    _SubprocessScriptLauncher as SubprocessScriptLauncher,
)
from lightning.pytorch.utilities.data import _get_dataloader_init_args_and_kwargs as loader_args
from lightning.pytorch.utilities.data import _update_dataloader as update_dataloader
from packaging.version import Version

__all__ = ["SubprocessScriptLauncher", "loader_args", "update_dataloader"]

PATCH_CHECKED = (Version("2.5.2"), Version("2.6.6"))


def _no_broadcast() -> None:
    """In place of `_TrainingEpochLoop._broadcast_sigterm_tensor` (module level: picklable)."""


def skip_sigterm_broadcast(trainer: Any) -> bool:
    """The one patch (see above), on this trainer's loop; whether it was applied."""
    low, high = PATCH_CHECKED
    loop = trainer.fit_loop.epoch_loop
    if not (
        low <= Version(lightning.__version__) <= high and hasattr(loop, "_broadcast_sigterm_tensor")
    ):
        return False
    loop._broadcast_sigterm_tensor = _no_broadcast
    return True


def stop_between_batches(trainer: Any) -> None:
    """Lightning's own "stop after this batch" (what its SIGTERM handler sets): the loops raise
    `SIGTERMException` where their state is consistent, and checkpoint callbacks save."""
    trainer._signal_connector.received_sigterm = True


def also_every_epoch(checkpoint: Any) -> None:
    """A `ModelCheckpoint` with `every_n_train_steps` that saves at every epoch end as well
    (Lightning refuses both arguments at once)."""
    checkpoint._every_n_epochs = 1


def start_method(strategy: Any) -> str | None:
    """A DDP-family strategy's: "popen" (re-runs the script), "spawn" or "fork"; else None."""
    return getattr(strategy, "_start_method", None)


def set_launcher(strategy: Any, launcher: Any) -> None:
    strategy._launcher = launcher


def ddp_launch(strategy: Any) -> tuple[str | None, str | None]:
    """(start method, process-group backend) a DDP-family strategy will use; None for others."""
    backend = getattr(strategy, "process_group_backend", None)
    if backend is None and hasattr(strategy, "_get_process_group_backend"):
        backend = strategy._get_process_group_backend()  # what its setup will pick
    return start_method(strategy), backend


# -- what a module logged with `self.log`: each loop's result collection --------------------
def training_results(trainer: Any) -> Any:
    return getattr(trainer.fit_loop.epoch_loop, "_results", None)


def validation_results(trainer: Any) -> Any:
    return getattr(getattr(trainer.fit_loop.epoch_loop, "val_loop", None), "_results", None)


def logged_entries(results: Any) -> list[Any]:
    """The entries (`_ResultMetric`: ``.meta``, ``.value``...) of a result collection."""
    return [entry for entry in (results or {}).values() if getattr(entry, "meta", None)]


def logged_name(entry: Any) -> str:
    """An entry's name in ``callback_metrics`` (``val_acc/dataloader_idx_0``: several loaders)."""
    meta = entry.meta
    if meta.add_dataloader_idx and meta.dataloader_idx is not None:
        return f"{meta.name}/dataloader_idx_{meta.dataloader_idx}"
    return str(meta.name)


def active_results(trainer: Any) -> Any:
    """The result collection of the loop running now (training, validation or test)."""
    return getattr(trainer, "_results", None)


def combinable(entry: Any) -> bool:
    """A plain tensor value logged for the epoch without ``sync_dist`` (nor ``rank_zero_only``):
    Lightning keeps each process's sum and sample count, so it can combine them."""
    sync = entry.meta.sync
    return bool(entry.is_tensor and entry.meta.on_epoch and not sync.should) and not (
        sync.rank_zero_only
    )


def combine_across_processes(entry: Any, combine: bool) -> None:
    """Whether Lightning combines ``entry`` across processes when it computes it, as for
    ``self.log(..., sync_dist=True)``: summed values and sample counts, a weighted mean."""
    entry.meta.sync.should = combine
