"""`checkpoints/last.ckpt`, what a resume continues from: a ``ModelCheckpoint`` without a monitor
(whose state follows a moved run directory: `movable_checkpoint`) that saves at every epoch end, every ``every_n_train_steps`` steps when set, and when SIGTERM or
Ctrl-C stops the run. (Lightning's ``save_last=true`` rewrites ``last.ckpt`` only in epochs that
also save a best checkpoint.)
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from .. import lightning_compat as compat
from .movable_checkpoint import MovableCheckpoint


class LastCheckpoint(MovableCheckpoint):
    def __init__(
        self, every_n_train_steps: int | None = None, save_on_interrupt: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(
            filename=kwargs.pop("filename", "last"),
            every_n_train_steps=every_n_train_steps or None,
            save_on_exception=save_on_interrupt,
            enable_version_counter=False,
            **kwargs,
        )
        compat.also_every_epoch(self)  # the epoch-end save is the one after validation

    def on_train_batch_end(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        # Lightning resumes a checkpoint of an epoch's last batch as if the epoch had ended,
        # skipping its validation and epoch-end hooks: the epoch-end save covers that batch.
        if not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            super().on_train_batch_end(trainer, *args, **kwargs)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        """Only a stop by SIGTERM or Ctrl-C (``SIGTERMException``, raised between two batches,
        where the state is consistent) saves; any other error keeps the last file."""
        fitting = trainer.state.fn == TrainerFn.FITTING and trainer.global_step > 0
        if isinstance(exception, SIGTERMException) and fitting:
            super().on_exception(trainer, pl_module, exception)
