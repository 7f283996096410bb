"""Logs the best checkpoint of a run to Weights & Biases as a `model` artifact."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import WandbLogger


class WandbBestCheckpoint(Callback):
    """At the end of fit, log the monitored checkpoint callback's best file, aliased `best`.

    Written here because Lightning's ``WandbLogger(log_model=True)`` logs the files of every
    ``ModelCheckpoint`` and aliases each one's own best as `best`, so the unmonitored
    `last.ckpt` callback would claim that alias too. Online the file is uploaded at once;
    offline the run file records it and `wandb sync` uploads it later. The file is referenced
    where it is (``policy="immutable"``), not copied to wandb's staging folder, so keep the run
    directory until it is synced. Does nothing without a wandb logger or a best checkpoint.
    """

    def __init__(self, aliases: Sequence[str] = ("best",)) -> None:
        self.aliases = list(aliases)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = next((lg for lg in trainer.loggers if isinstance(lg, WandbLogger)), None)
        checkpoint = next(
            (
                cb
                for cb in trainer.checkpoint_callbacks
                if isinstance(cb, ModelCheckpoint) and cb.monitor and cb.best_model_path
            ),
            None,
        )
        if logger is None or checkpoint is None or not trainer.is_global_zero:
            return
        import wandb

        run = logger.experiment
        score = checkpoint.best_model_score
        artifact = wandb.Artifact(
            name=f"model-{run.id}",
            type="model",
            metadata={
                "monitor": checkpoint.monitor,
                "mode": checkpoint.mode,
                "score": None if score is None else float(score),
                "original_filename": Path(checkpoint.best_model_path).name,
            },
        )
        artifact.add_file(checkpoint.best_model_path, name="model.ckpt", policy="immutable")
        run.log_artifact(artifact, aliases=self.aliases)
