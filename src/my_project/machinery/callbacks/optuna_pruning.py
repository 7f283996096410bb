"""Optuna pruning: report the searched metric after every validation, stop hopeless trials.
Unlike optuna-integration's callback (the trial in every process, ``TrialPruned`` raised out
of ``fit``), rank 0 reports and every rank stops together: a pruned trial ends like an
early-stopped run, tested. The sweeper puts each job's trial in :data:`TRIALS`.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info

from ..errors import UserError

TRIALS: dict[int, Any] = {}  # the Optuna trial of each Hydra job number (`hydra.job.num`)


class OptunaPruning(Callback):
    """Report ``monitor`` to the job's Optuna trial each epoch; stop every rank when pruned."""

    def __init__(self, monitor: str) -> None:
        self.monitor = monitor
        self._trial: Any = None
        self._last_epoch = -1

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        from hydra.core.hydra_config import HydraConfig

        if stage == "fit" and trainer.is_global_zero and HydraConfig.initialized():
            self._trial = TRIALS.get(HydraConfig.get().job.num)  # None: outside a search

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        epoch = trainer.current_epoch
        if trainer.sanity_checking or trainer.state.fn != "fit" or epoch <= self._last_epoch:
            return  # one report per epoch (several validations per epoch report the first)
        self._last_epoch = epoch
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:  # the same on every rank: metrics are synchronised
            raise UserError(
                f"optimized_metric={self.monitor} is not among the metrics logged at "
                f"validation ({', '.join(sorted(trainer.callback_metrics)) or 'none'}); set "
                "`optimized_metric` in the search config to one of them.",
                every_rank=True,
            )
        if self._trial is not None:
            self._trial.report(float(value), step=epoch)
        prune = self._trial is not None and self._trial.should_prune()
        if trainer.strategy.broadcast(prune, src=0):  # rank 0 decides for every rank
            trainer.should_stop = True
            if self._trial is not None:
                self._trial.set_user_attr("pruned_at_epoch", epoch)
            rank_zero_info(
                f"Optuna pruned this trial after epoch {epoch}: {self.monitor}={float(value):.4g}."
            )
