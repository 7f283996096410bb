"""`checkpoints/last.ckpt`: the newest state of training, what a resume continues from.

A ``ModelCheckpoint`` without a monitor, saving at every epoch end, every
``every_n_train_steps`` steps when set, and when the run is stopped by SIGTERM or Ctrl-C
(see ``reliability/signals.py``). It is a second callback next to the best-model one because
Lightning 2.6's ``save_last=true`` only rewrites ``last.ckpt`` in epochs that also save a best
checkpoint. The file is written atomically by ``reliability.atomic_io.AtomicCheckpointIO``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException


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
            monitor=None,
            save_top_k=1,
            every_n_train_steps=every_n_train_steps or None,
            enable_version_counter=False,
            **kwargs,
        )
        # Lightning refuses every_n_train_steps together with every_n_epochs, but a resumable
        # "last" needs both: the epoch-end save is the one that includes validation.
        self._every_n_epochs = 1
        self.save_on_interrupt = save_on_interrupt
        self._sigterm_deferred = False

    @property
    def path(self) -> Path:
        return Path(str(self.dirpath)) / f"{self.filename}{self.FILE_EXTENSION}"

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # Lightning resumes a checkpoint taken at the last batch of an epoch as if the epoch had
        # ended, skipping its validation and epoch-end hooks; the epoch-end save covers it.
        if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        # On SIGTERM Lightning stops after the current validation batch, and a run resumed from
        # there skips the rest of that validation (its metrics, best checkpoint, val/acc_best).
        # Let validation finish first: hide the flag (a private attribute) until it ends.
        if (
            self.save_on_interrupt
            and trainer.received_sigterm
            and trainer.state.fn == TrainerFn.FITTING
            and not trainer.sanity_checking
        ):
            trainer._signal_connector.received_sigterm = False
            self._sigterm_deferred = True

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._sigterm_deferred:
            trainer._signal_connector.received_sigterm = True
            self._sigterm_deferred = False
        super().on_validation_end(trainer, pl_module)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        """On SIGTERM (and Ctrl-C, turned into SIGTERM) save what was trained so far.

        Lightning raises ``SIGTERMException`` between two batches, so the state is consistent.
        Any other exception (a crash, a non-finite loss) keeps the last good checkpoint.
        """
        if not (self.save_on_interrupt and isinstance(exception, SIGTERMException)):
            return
        if (
            trainer.state.fn != TrainerFn.FITTING
            or trainer.sanity_checking
            or getattr(trainer, "fast_dev_run", False)
        ):
            return
        if trainer.validating:  # the signal beat the deferral above: keep the older file
            rank_zero_info(f"Stopped during validation; {self.path} is from an earlier step.")
            return
        if trainer.global_step == 0:
            rank_zero_info("Stopped before the first training step: no checkpoint to save.")
            return
        if self._last_global_step_saved != trainer.global_step:
            trainer.save_checkpoint(self.path, weights_only=False)
            self._last_global_step_saved = trainer.global_step
            self.last_model_path = str(self.path)
        rank_zero_info(
            f"Saved {self.path} (epoch {trainer.current_epoch}, step {trainer.global_step})."
        )
