"""Logs the best checkpoint of a run to Weights & Biases as a `model` artifact.

Lightning's ``WandbLogger(log_model=True)`` logs the files of every ``ModelCheckpoint`` and
aliases each one's own best as `best`, so the unmonitored `last.ckpt` callback would claim
that alias too: this logs the monitored callback's best file alone. Online it is uploaded at
once; offline `wandb sync` uploads it later. The file is referenced where it is
(``policy="immutable"``), not copied: keep the run directory until it is synced.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import WandbLogger


def best_checkpoint(trainer: Trainer) -> Any:
    """The monitored ``ModelCheckpoint`` that saved a best file, on rank 0; else None."""
    found = (
        cb
        for cb in trainer.checkpoint_callbacks
        if isinstance(cb, ModelCheckpoint) and cb.monitor and cb.best_model_path
    )
    return next(found, None) if trainer.is_global_zero else None


class WandbBestCheckpoint(Callback):
    """At the end of fit, log the best checkpoint aliased `best` (``aliases``)."""

    def __init__(self, aliases: Sequence[str] = ("best",)) -> None:
        self.aliases = list(aliases)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = next((lg for lg in trainer.loggers if isinstance(lg, WandbLogger)), None)
        checkpoint = best_checkpoint(trainer)
        if logger is None or checkpoint is None:
            return
        import wandb

        score = checkpoint.best_model_score
        metadata = {
            "monitor": checkpoint.monitor,
            "mode": checkpoint.mode,
            "score": None if score is None else float(score),
            "original_filename": Path(checkpoint.best_model_path).name,
        }
        artifact = wandb.Artifact(f"model-{logger.experiment.id}", "model", metadata=metadata)
        artifact.add_file(checkpoint.best_model_path, name="model.ckpt", policy="immutable")
        logger.experiment.log_artifact(artifact, aliases=self.aliases)
