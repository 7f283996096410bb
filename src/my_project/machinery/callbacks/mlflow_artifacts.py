"""Logs a run's config file and its best checkpoint to MLflow as artifacts."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import MLFlowLogger


class MLflowArtifacts(Callback):
    """When fit starts, ``config.yaml`` (the resolved config, secrets masked, written by
    `record.start`); when it ends, the monitored checkpoint callback's best file, under
    ``checkpoints/``. Does nothing without an MLflow logger.

    Written here because Lightning's ``MLFlowLogger(log_model=True)`` logs the files of
    whichever ``ModelCheckpoint`` saved last, which is the unmonitored `last.ckpt` callback.
    Only rank 0 logs.
    """

    def __init__(self, config_path: str | None = None) -> None:
        self.config_path = config_path

    @staticmethod
    def _logger(trainer: Trainer) -> MLFlowLogger | None:
        logger = next((lg for lg in trainer.loggers if isinstance(lg, MLFlowLogger)), None)
        return logger if logger is not None and trainer.is_global_zero else None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = self._logger(trainer)
        if logger is not None and self.config_path and Path(self.config_path).is_file():
            logger.experiment.log_artifact(logger.run_id, self.config_path)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = self._logger(trainer)
        checkpoint = next(
            (
                cb
                for cb in trainer.checkpoint_callbacks
                if isinstance(cb, ModelCheckpoint) and cb.monitor and cb.best_model_path
            ),
            None,
        )
        if logger is not None and checkpoint is not None:
            logger.experiment.log_artifact(logger.run_id, checkpoint.best_model_path, "checkpoints")
