"""Checks on the composed config that turn late, cryptic failures into early, clear ones."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from .errors import UserError

# Trainer arguments that must be whole numbers, and those that may be a number of batches
# (int) or a fraction (float). Lightning itself only fails deep inside the loop on these.
_INT_FIELDS = (
    "max_epochs",
    "min_epochs",
    "max_steps",
    "min_steps",
    "num_nodes",
    "log_every_n_steps",
    "accumulate_grad_batches",
    "check_val_every_n_epoch",
    "num_sanity_val_steps",
)
_NUMBER_FIELDS = (
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
    "val_check_interval",
    "overfit_batches",
    "gradient_clip_val",
)


def check_trainer_config(trainer: DictConfig) -> None:
    for field in _INT_FIELDS:
        value = trainer.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(
                f"trainer.{field}={value!r} must be a whole number, not {type(value).__name__}. "
                f"Use for example `trainer.{field}=10`."
            )
    for field in _NUMBER_FIELDS:
        value = trainer.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(
                f"trainer.{field}={value!r} must be a number (an int counts batches, a float in "
                f"[0, 1] a fraction), not {type(value).__name__}. Use for example `trainer.{field}=0.5`."
            )


def check_checkpoint_path(ckpt_path: str | None, what: str = "ckpt_path") -> str | None:
    """Return the checkpoint path if it exists; say clearly if it does not."""
    if ckpt_path is None:
        return None
    path = Path(ckpt_path)
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.ckpt"))
            hint = f" Checkpoints in {path.parent}: {', '.join(found) or 'none'}."
        raise UserError(
            f"{what}={ckpt_path} does not exist.{hint} Pass the path of a `.ckpt` file, e.g. "
            f"`{what}=logs/train/runs/<run>/checkpoints/last.ckpt`."
        )
    return str(path)
