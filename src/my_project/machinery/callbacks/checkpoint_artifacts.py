"""The best checkpoint of a run (rank 0), to Weights & Biases as a `model` artifact aliased
``best``, to MLflow under ``checkpoints/`` with the run's ``config.yaml``. Lightning's
``log_model=True`` would log the newest file, `last.ckpt`. The wandb file is referenced where it
is: offline, keep the run directory until `wandb sync` has uploaded it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import MLFlowLogger, WandbLogger


class CheckpointArtifacts(Callback):
    def __init__(self, config_path: str | None = None, aliases: Sequence[str] = ("best",)) -> None:
        self.config_path, self.aliases = config_path, list(aliases)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        for logger in trainer.loggers if trainer.is_global_zero and self.config_path else []:
            if isinstance(logger, MLFlowLogger) and Path(self.config_path).is_file():  # type: ignore[arg-type]
                logger.experiment.log_artifact(logger.run_id, self.config_path)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        best = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
        best = [c for c in best if c.monitor and c.best_model_path and trainer.is_global_zero]
        for logger in trainer.loggers if best else []:
            if isinstance(logger, MLFlowLogger):
                logger.experiment.log_artifact(
                    logger.run_id, best[0].best_model_path, "checkpoints"
                )
            elif isinstance(logger, WandbLogger):
                self._log_to_wandb(logger, best[0])

    def _log_to_wandb(self, logger: WandbLogger, checkpoint: ModelCheckpoint) -> None:
        import wandb

        score: Any = checkpoint.best_model_score
        metadata = {str(checkpoint.monitor): None if score is None else float(score)}
        artifact = wandb.Artifact(f"model-{logger.experiment.id}", "model", metadata=metadata)
        artifact.add_file(checkpoint.best_model_path, name="model.ckpt", policy="immutable")
        logger.experiment.log_artifact(artifact, aliases=self.aliases)
