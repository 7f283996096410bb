"""Stop at the first NaN/inf training loss, before any checkpoint holds what followed it.

Lightning's ``EarlyStopping(check_finite=True)`` looks only at a monitored metric at epoch or
validation end, by when NaN weights may have been saved; ``detect_anomaly`` slows every step.
Here a flag stays on the device (no host sync per step) and is read every
``check_every_n_steps`` steps and before every checkpoint. The loss can stay finite while the
optimizer's state already overflowed (AdamW's ``exp_avg_sq`` at a huge learning rate), so a
checkpoint's weights and optimizer state are checked too before it is written: every checkpoint
kept is finite, and a resume with a lower learning rate goes on from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning_utilities.core.apply_func import apply_to_collection
from torch import Tensor
from torchmetrics import Metric

from ..errors import UserError


class NonFiniteLossError(UserError):
    exit_code = 3


class StopOnNonFiniteLoss(Callback):
    def __init__(self, check_every_n_steps: int = 1) -> None:
        self.check_every_n_steps = max(1, int(check_every_n_steps))
        self._step: Tensor | None = None  # global step of the first bad loss, -1 if none
        self._value: Tensor | None = None

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, *args: Any
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, Tensor):
            return
        loss = loss.detach().float()
        if self._step is None or self._value is None:
            self._step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._value = torch.zeros((), device=loss.device)
        new = (self._step < 0) & ~torch.isfinite(loss)
        self._step = torch.where(new, trainer.global_step, self._step)
        self._value = torch.where(new, loss, self._value)
        if trainer.global_step % self.check_every_n_steps == 0:
            self._check(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer)

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._check(trainer)  # raising here keeps the previous (good) file
        # Metric states (a running sum of huge losses) may overflow harmlessly: not weights.
        metrics = tuple(f"{n}." for n, m in pl_module.named_modules() if isinstance(m, Metric))
        weights = {
            k: v for k, v in checkpoint.get("state_dict", {}).items() if not k.startswith(metrics)
        }
        parts = {"the weights": weights, "the optimizer state": checkpoint.get("optimizer_states")}
        if broken := [name for name, part in parts.items() if not all_finite(part)]:
            raise NonFiniteLossError(
                f"Training stopped: {' and '.join(broken)} held NaN or inf at step "
                f"{trainer.global_step}, while the loss was still finite, so no checkpoint was "
                f"written from it. {_advice(trainer)}"
            )

    def _check(self, trainer: Trainer) -> None:
        if self._step is None or self._value is None or (step := int(self._step)) < 0:  # a sync
            return
        raise NonFiniteLossError(
            f"Training stopped: the training loss was {float(self._value)} at step {step} "
            f"(epoch {trainer.current_epoch}). {_advice(trainer)}"
        )


def _advice(trainer: Trainer) -> str:
    saved = {getattr(cb, "best_model_path", "") for cb in trainer.checkpoint_callbacks}
    saved |= {getattr(cb, "last_model_path", "") for cb in trainer.checkpoint_callbacks}
    kept = ", ".join(sorted(path for path in saved if path and Path(path).is_file()))
    return (f"The checkpoints written before it are kept, all finite: {kept}. " if kept else "") + (
        "Likely causes: a learning rate too high (`python train.py resume=<run dir> "
        "model.lr=<lower>` goes on from the last checkpoint), exploding gradients (try "
        "`++trainer.gradient_clip_val=1.0`), NaN or inf in the input data, or float16 overflow "
        "(try `trainer.precision=bf16-mixed` or `32-true`)."
    )


def all_finite(data: Any) -> bool:
    """Whether every tensor anywhere in ``data`` is finite: one host sync per device."""
    flags: dict[torch.device, list[Tensor]] = {}
    apply_to_collection(
        data, Tensor, lambda t: flags.setdefault(t.device, []).append(torch.isfinite(t).all())
    )
    return all(bool(torch.stack(device_flags).all()) for device_flags in flags.values())
