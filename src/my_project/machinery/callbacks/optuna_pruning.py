"""Optuna pruning: report the searched metric after every validation, stop hopeless trials.

optuna-integration's ``PyTorchLightningPruningCallback`` wants the Optuna trial in every
process (a DDP child started by `trainer.devices=2` has none), and raises ``TrialPruned`` out
of ``fit``, so a pruned run ends as a failure: no test, no ``metrics.json``. This callback
reports from global rank 0 only, broadcasts the pruner's answer, and sets
``trainer.should_stop`` on every rank together: a pruned trial ends like an early-stopped run.
The sweeper (`hydra_plugins/my_project_optuna`) runs each job in this process and hands over
the trial of each job number with :func:`trials_for_jobs`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from ..errors import UserError


@dataclass
class TrialOfJob:
    """An Optuna trial a job reports to, and the epoch it was pruned at, if it was."""

    trial: Any  # optuna.Trial
    pruned_at_epoch: int | None = None


_trials_by_job: dict[int, TrialOfJob] = {}


@contextmanager
def trials_for_jobs(trials: Mapping[int, TrialOfJob]) -> Iterator[None]:
    """While the sweeper's jobs run: the trial of each Hydra job number (``hydra.job.num``)."""
    _trials_by_job.update(trials)
    try:
        yield
    finally:
        for number in trials:
            _trials_by_job.pop(number, None)


class OptunaPruning(Callback):
    """Report ``monitor`` to the job's Optuna trial each epoch; stop every rank when pruned."""

    def __init__(self, monitor: str) -> None:
        self.monitor = monitor
        self._job: TrialOfJob | None = None
        self._last_epoch = -1

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        from hydra.core.hydra_config import HydraConfig

        if stage == "fit" and trainer.is_global_zero:
            job = HydraConfig.get().job.num if HydraConfig.initialized() else None
            self._job = _trials_by_job.get(job) if job is not None else None
            if self._job is None:
                rank_zero_warn("OptunaPruning: no Optuna trial for this job in this process.")

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
        if self._job is not None:
            self._job.trial.report(float(value), step=epoch)
        prune = self._job is not None and self._job.trial.should_prune()
        if trainer.strategy.broadcast(prune, src=0):  # rank 0 decides for every rank
            trainer.should_stop = True
            if self._job is not None:
                self._job.pruned_at_epoch = epoch
            rank_zero_info(
                f"Optuna pruned this trial after epoch {epoch}: {self.monitor}={float(value):.4g}."
            )
