"""`checkpoints/last.ckpt`: the newest state of training, what a resume continues from.

A ``ModelCheckpoint`` without a monitor that saves at every epoch end, every
``every_n_train_steps`` steps when set, and when SIGTERM or Ctrl-C stops the run
(`reliability/signals.py`). Lightning's ``save_last=true`` rewrites ``last.ckpt`` only in
epochs that also save a best checkpoint, hence this second callback. Written atomically by
``reliability.atomic_io.AtomicCheckpointIO``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from .. import lightning_compat as compat


class LastCheckpoint(ModelCheckpoint):
    def __init__(
        self,
        dirpath: str,
        filename: str = "last",
        every_n_train_steps: int | None = None,
        save_on_interrupt: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=filename,
            every_n_train_steps=every_n_train_steps or None,
            enable_version_counter=False,
            **kwargs,
        )
        compat.also_every_epoch(self)  # the epoch-end save is the one after validation
        self.save_on_interrupt = save_on_interrupt
        self.path = Path(dirpath) / f"{filename}{self.FILE_EXTENSION}"

    def on_train_batch_end(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        # Lightning resumes a checkpoint of an epoch's last batch as if the epoch had ended,
        # skipping its validation and epoch-end hooks: the epoch-end save covers that batch.
        if not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            super().on_train_batch_end(trainer, *args, **kwargs)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        """A stop by SIGTERM or Ctrl-C (``SIGTERMException``, raised between two batches, where
        the state is consistent) saves what was trained; any other error keeps the last file."""
        if not (self.save_on_interrupt and isinstance(exception, SIGTERMException)):
            return
        if (
            trainer.state.fn != TrainerFn.FITTING
            or trainer.sanity_checking
            or getattr(trainer, "fast_dev_run", False)
        ):
            return
        if trainer.global_step == 0:
            rank_zero_info("Stopped before the first training step: no checkpoint to save.")
            return
        if compat.last_saved_step(self) != trainer.global_step:
            trainer.save_checkpoint(self.path, weights_only=False)
            compat.set_last_saved_step(self, trainer.global_step)
            self.last_model_path = str(self.path)
        rank_zero_info(
            f"Saved {self.path} (epoch {trainer.current_epoch}, step {trainer.global_step})."
        )
