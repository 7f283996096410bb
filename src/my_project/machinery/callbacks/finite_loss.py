"""Stop at the first NaN/inf training loss, before any checkpoint holds what followed it.

``EarlyStopping(check_finite=True)`` looks only at a monitored metric at epoch or validation end,
when NaN weights may have been saved; ``detect_anomaly`` slows every step. Here a flag stays on
the device, read every ``check_every_n_steps`` steps (a host sync) and before every checkpoint,
whose weights and optimizer state are checked too (AdamW's can overflow before the loss does).
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


class StopOnNonFiniteLoss(Callback):
    def __init__(self, check_every_n_steps: int = 1) -> None:
        self.check_every_n_steps = max(1, int(check_every_n_steps))
        self._first: tuple[Tensor, Tensor] | None = None  # step of the first bad loss (-1), loss

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, *args: Any
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, Tensor):
            return
        loss = loss.detach().float()
        step, value = self._first or (torch.tensor(-1, device=loss.device), loss)
        new = (step < 0) & ~torch.isfinite(loss)
        self._first = torch.where(new, trainer.global_step, step), torch.where(new, loss, value)
        if trainer.global_step % self.check_every_n_steps == 0:
            self._check(trainer)

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._check(trainer)  # raising here keeps the previous (good) file
        # Metric states (a running sum of huge losses) may overflow harmlessly: not weights.
        metrics = tuple(f"{n}." for n, m in pl_module.named_modules() if isinstance(m, Metric))
        weights = {k: v for k, v in checkpoint["state_dict"].items() if not k.startswith(metrics)}
        if not all_finite([weights, checkpoint.get("optimizer_states")]):
            raise UserError(
                f"Training stopped: the weights or optimizer state held NaN or inf at step "
                f"{trainer.global_step}, while the loss was still finite. {_advice(trainer)}",
                exit_code=3,
            )

    def _check(self, trainer: Trainer) -> None:
        if self._first is None or (step := int(self._first[0])) < 0:  # a host sync
            return
        raise UserError(
            f"Training stopped: the training loss was {float(self._first[1])} at step {step} "
            f"(epoch {trainer.current_epoch}). {_advice(trainer)}",
            exit_code=3,
        )


def _advice(trainer: Trainer) -> str:
    callbacks, names = trainer.checkpoint_callbacks, ("best_model_path", "last_model_path")
    kept = ", ".join(
        sorted({p for c in callbacks for n in names if Path(p := getattr(c, n, "")).is_file()})
    )
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
