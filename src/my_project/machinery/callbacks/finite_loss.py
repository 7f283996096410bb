"""Stop at the first NaN/inf training loss, before it reaches any checkpoint.

Lightning's ``EarlyStopping(check_finite=True)`` only looks at a monitored metric at epoch or
validation end, by which time NaN weights may have been saved; ``detect_anomaly`` slows every
step. This keeps a flag on the device (no host sync per step), reads it every
``check_every_n_steps`` steps and always before a checkpoint is written, so no checkpoint ever
holds weights from after the bad step.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor

from ..errors import UserError


class NonFiniteLossError(UserError):
    """Training produced a NaN or infinite loss."""

    exit_code = 3


class StopOnNonFiniteLoss(Callback):
    def __init__(self, check_every_n_steps: int = 1) -> None:
        self.check_every_n_steps = max(1, int(check_every_n_steps))
        self._first_step: Tensor | None = None  # global step of the first bad loss, -1 if none
        self._first_value: Tensor | None = None

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, Tensor):
            return
        loss = loss.detach().float()
        if self._first_step is None or self._first_value is None:
            self._first_step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._first_value = torch.zeros((), device=loss.device)
        new = (self._first_step < 0) & ~torch.isfinite(loss)
        self._first_step = torch.where(new, trainer.global_step, self._first_step)
        self._first_value = torch.where(new, loss, self._first_value)
        if trainer.global_step % self.check_every_n_steps == 0:
            self._check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer)

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._check(trainer)  # raising here keeps the previous (good) file in place

    def _check(self, trainer: Trainer) -> None:
        if self._first_step is None or self._first_value is None:
            return
        step = int(self._first_step)  # the one host sync
        if step < 0:
            return
        raise NonFiniteLossError(self._message(trainer, step, float(self._first_value)))

    @staticmethod
    def _message(trainer: Trainer, step: int, value: float) -> str:
        lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else None
        lr_text = f"the learning rate ({lr:g}) is too high" if lr is not None else "a too-high lr"
        saved = sorted(
            {
                path
                for cb in trainer.checkpoint_callbacks
                for path in (getattr(cb, "last_model_path", ""), getattr(cb, "best_model_path", ""))
                if path and Path(path).is_file()
            }
        )
        kept = (
            f"The checkpoints written before it are kept: {', '.join(saved)}."
            if saved
            else "No checkpoint had been written yet."
        )
        return (
            f"Training stopped: the training loss was {value} at step {step} (epoch "
            f"{trainer.current_epoch}). {kept} Likely causes: "
            f"{lr_text} (lower `model.lr`), exploding gradients (try "
            "`trainer.gradient_clip_val=1.0`), NaN or inf values in the input data, or float16 "
            "overflow (try `trainer.precision=bf16-mixed` or `32-true`)."
        )
