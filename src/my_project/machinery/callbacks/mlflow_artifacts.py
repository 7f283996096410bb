"""Logs a run's config file and its best checkpoint to MLflow as artifacts: ``config.yaml``
(the resolved config, secrets masked, written by `record.start`) when fit starts, the
monitored checkpoint's best file under ``checkpoints/`` when it ends. Only rank 0 logs;
nothing without an MLflow logger. (Lightning's ``MLFlowLogger(log_model=True)`` would log the
files of whichever ``ModelCheckpoint`` saved last: the unmonitored `last.ckpt`.)"""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import MLFlowLogger

from .wandb_checkpoint import best_checkpoint


class MLflowArtifacts(Callback):
    def __init__(self, config_path: str | None = None) -> None:
        self.config_path = config_path

    def _log(self, trainer: Trainer, path: str | None, folder: str | None = None) -> None:
        for logger in trainer.loggers if trainer.is_global_zero and path else []:
            if isinstance(logger, MLFlowLogger) and Path(path).is_file():  # type: ignore[arg-type]
                logger.experiment.log_artifact(logger.run_id, path, folder)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._log(trainer, self.config_path)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        checkpoint = best_checkpoint(trainer)
        self._log(trainer, checkpoint and checkpoint.best_model_path, "checkpoints")
