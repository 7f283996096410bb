"""Stop at the first NaN/inf training loss, before it reaches any checkpoint.

Lightning's ``EarlyStopping(check_finite=True)`` only looks at a monitored metric at epoch or
validation end, by which time NaN weights may have been saved; ``detect_anomaly`` slows every
step. This keeps a flag on the device (no host sync per step), reads it every
``check_every_n_steps`` steps and always before a checkpoint is written, so no checkpoint ever
holds weights from after the bad step.

The loss can stay finite while the optimizer's state already overflowed (AdamW's
``exp_avg_sq`` at a huge learning rate): a checkpoint of that state fails again at the same
step when resumed. So before every save the checkpoint's weights and optimizer states are
checked too (one pass over them per save), and a non-finite one stops the run the same way:
the checkpoints kept are always finite, and a resume with a lower learning rate goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor
from torchmetrics import Metric

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
        # Raising here keeps the previous (good) file in place.
        self._check(trainer)
        # Metric states (a running sum of huge losses) may overflow harmlessly: not weights.
        metrics = tuple(f"{n}." for n, m in pl_module.named_modules() if isinstance(m, Metric))
        weights = {
            k: v
            for k, v in (checkpoint.get("state_dict") or {}).items()
            if not k.startswith(metrics)
        }
        parts = {"state_dict": weights, "optimizer_states": checkpoint.get("optimizer_states")}
        broken = [part for part, data in parts.items() if not all_finite(_tensors(data))]
        if broken:
            raise NonFiniteLossError(self._state_message(trainer, broken))

    def _check(self, trainer: Trainer) -> None:
        if self._first_step is None or self._first_value is None:
            return
        step = int(self._first_step)  # the one host sync
        if step < 0:
            return
        raise NonFiniteLossError(self._message(trainer, step, float(self._first_value)))

    @classmethod
    def _state_message(cls, trainer: Trainer, broken: list[str]) -> str:
        what = " and ".join(
            {"state_dict": "the weights", "optimizer_states": "the optimizer state"}[part]
            for part in broken
        )
        return (
            f"Training stopped: {what} held NaN or inf at step {trainer.global_step} (epoch "
            f"{trainer.current_epoch}), while the loss was still finite, so no checkpoint was "
            f"written from it. {cls._kept(trainer)} {cls._causes(trainer)}"
        )

    @staticmethod
    def _kept(trainer: Trainer) -> str:
        saved = sorted(
            {
                path
                for cb in trainer.checkpoint_callbacks
                for path in (getattr(cb, "last_model_path", ""), getattr(cb, "best_model_path", ""))
                if path and Path(path).is_file()
            }
        )
        if not saved:
            return "No checkpoint had been written yet."
        return (
            f"The checkpoints written before it are kept (their weights and optimizer states are "
            f"finite): {', '.join(saved)}."
        )

    @staticmethod
    def _causes(trainer: Trainer) -> str:
        lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else None
        lr_text = f"the learning rate ({lr:g}) is too high" if lr is not None else "a too-high lr"
        return (
            f"Likely causes: {lr_text} (lower `model.lr`; `python train.py resume=<run dir> "
            "model.lr=...` goes on from the last checkpoint), exploding gradients (try "
            "`++trainer.gradient_clip_val=1.0`), NaN or inf values in the input data, or float16 "
            "overflow (try `trainer.precision=bf16-mixed` or `32-true`)."
        )

    @classmethod
    def _message(cls, trainer: Trainer, step: int, value: float) -> str:
        return (
            f"Training stopped: the training loss was {value} at step {step} (epoch "
            f"{trainer.current_epoch}). {cls._kept(trainer)} {cls._causes(trainer)}"
        )


def _tensors(data: Any) -> list[Tensor]:
    """The floating-point tensors anywhere in nested dicts and lists."""
    if isinstance(data, Tensor):
        return [data] if data.is_floating_point() or data.is_complex() else []
    if isinstance(data, Mapping):
        return [t for value in data.values() for t in _tensors(value)]
    if isinstance(data, (list, tuple)):
        return [t for value in data for t in _tensors(value)]
    return []


def all_finite(tensors: list[Tensor]) -> bool:
    """Whether every value of every tensor is finite: one host sync per device."""
    flags: dict[torch.device, list[Tensor]] = {}
    for tensor in tensors:
        flags.setdefault(tensor.device, []).append(torch.isfinite(tensor).all())
    return all(bool(torch.stack(device_flags).all()) for device_flags in flags.values())
