"""Under DDP, every value a module logs for the epoch is the whole data set's, not rank 0's.

A value logged without ``sync_dist=True`` (``self.log("test_acc", acc)``, as the Lightning docs
write it) is each process's own mean of its share: the test table, ``metrics.json``, the plots
and the checkpoint's monitor would hold rank 0's (Lightning only warns). Lightning keeps each
process's weighted sum and sample count (its ``batch_size``) for such a value, so here, once a
loop's last batch of a loader has logged, each such value is switched to what
``sync_dist=True`` does: when Lightning computes the epoch's value, it sums the sums and the
counts of every process, a mean weighted by each process's samples. Switched back before the
next batch logs again (Lightning refuses a value logged with other arguments). No collective
of its own, and nothing per step: the sums meet once an epoch, where Lightning computes them.

What cannot be combined is said plainly at the end of the loop, with how to fix it: a value a
module logs in its own ``on_*_epoch_end`` (after its loader's last batch: its own number, not a
sum), or one logged with ``rank_zero_only=True``. As with ``sync_dist=True``, every process must
log the same values: one logged by rank 0 alone (``if self.global_rank == 0:``) would wait for
the others; log it with ``rank_zero_only=True`` instead, as Lightning's docs say.
"""

from __future__ import annotations

import sys
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from .. import lightning_compat as compat
from ..distributed import is_rank_zero


class WholeMetrics(Callback):
    def __init__(self) -> None:
        self._combined: dict[str, list[Any]] = {"train": [], "validation": [], "test": []}
        self._noted: set[str] = set()

    def _combine(
        self, trainer: Trainer, loop: str, is_last: bool, batch_idx: int, batches: Any
    ) -> None:
        """At a loader's last batch (of this process): its epoch values combined."""
        if trainer.world_size < 2:
            return
        count = batches if isinstance(batches, (int, float)) else None
        if not (is_last or (count is not None and batch_idx + 1 >= count)):
            return
        for entry in compat.logged_entries(compat.active_results(trainer)):
            if compat.combinable(entry):
                compat.combine_across_processes(entry, True)
                self._combined[loop].append(entry)

    def _restore(self, loop: str, dataloader_idx: int | None = None) -> None:
        """Before a batch of ``loop`` logs: its values (of that loader) as the module logs them."""
        kept = []
        for entry in self._combined[loop]:
            if dataloader_idx is None or entry.meta.dataloader_idx in (None, dataloader_idx):
                compat.combine_across_processes(entry, False)
            else:
                kept.append(entry)
        self._combined[loop] = kept

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore("train")

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore("validation")

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore("test")

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._combined["train"]:
            self._restore("train")

    def on_validation_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._combined["validation"]:
            self._restore("validation", dataloader_idx)

    def on_test_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._combined["test"]:
            self._restore("test", dataloader_idx)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, i: int
    ) -> None:
        progress = trainer.fit_loop.epoch_loop.batch_progress
        self._combine(trainer, "train", progress.is_last_batch, i, trainer.num_training_batches)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        fitting = trainer.state.fn == "fit"
        loop = trainer.fit_loop.epoch_loop.val_loop if fitting else trainer.validate_loop
        sanity = trainer.sanity_checking
        counts = trainer.num_sanity_val_batches if sanity else trainer.num_val_batches
        last = loop.batch_progress.is_last_batch
        self._combine(trainer, "validation", last, batch_idx, _at(counts, dataloader_idx))

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        last = trainer.test_loop.batch_progress.is_last_batch
        counts = _at(trainer.num_test_batches, dataloader_idx)
        self._combine(trainer, "test", last, batch_idx, counts)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._note_partial(trainer, "validation")

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._note_partial(trainer, "test")

    def _note_partial(self, trainer: Trainer, loop: str) -> None:
        """Name, once, each value of this loop that is still one process's."""
        if trainer.world_size < 2 or not is_rank_zero():
            return
        partial = [
            compat.logged_name(entry)
            for entry in compat.logged_entries(compat.active_results(trainer))
            if compat.combinable(entry) and compat.logged_name(entry) not in self._noted
        ]
        if not partial:
            return
        self._noted.update(partial)
        names = ", ".join(f"`{name}`" for name in partial)
        print(
            f"Note: {names} of the {loop} {'is' if len(partial) == 1 else 'are'} rank 0's alone "
            f"(logged in `on_{loop}_epoch_end`, or with rank_zero_only=True), not the "
            f"whole set's of all {trainer.world_size} processes, in the table, metrics.json and "
            f"the plots. Log it from `{loop}_step` (then combined, weighted by each process's "
            "samples), or as a torchmetrics metric, to have the whole set's.",
            file=sys.stderr,
            flush=True,
        )


def _at(counts: Any, index: int) -> Any:
    try:
        return counts[index]
    except (TypeError, IndexError):
        return counts
