"""An Optuna sweeper for Hydra, on Optuna's ask/tell API.

Why this exists: Hydra's own Optuna sweeper (`hydra-optuna-sweeper`, even its 1.3 release)
pins ``optuna<3``, so it downgrades a current Optuna, and its SQLite studies need
SQLAlchemy<2. This one keeps its command and config keys (``python train.py -m
hparams_search=mlp``; ``hydra.sweeper.params``, ``n_trials``, ``direction``, ``sampler``,
``storage``, ``study_name``; ``hydra.sweep.dir``) on current Optuna, and adds:

- pruning: each job reports its metric per epoch through the `OptunaPruning` callback,
  which finds its trial with :func:`~my_project.machinery.callbacks.optuna_pruning.trials_for_jobs`
  (so jobs run in this process: Hydra's default launcher);
- studies that survive: by default the study is a SQLite file in the sweep directory, and
  ``n_trials`` counts its finished trials (complete or pruned), so the same command with the
  same ``hydra.sweep.dir`` continues a killed search; the trial that was running when it was
  killed is marked failed and does not count;
- results: the best trials printed, ``best_params.yaml`` and plots (see _report.py).

Trial ``N`` runs in the job folder ``N`` (``hydra.job.num`` is the trial number), so folders
stay distinct across resumes. One search process per study at a time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ._report import RUN_DIR_ATTR, report
from ._search_space import SearchSpace, search_space

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import Trial

DIRECTIONS = ("minimize", "maximize")


class OptunaSweeper(Sweeper):
    """Asks Optuna for ``n_trials`` trials, runs each as a Hydra job, tells it the result."""

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        direction: str = "maximize",
        n_trials: int = 20,
        n_jobs: int = 1,
        study_name: str = "search",
        storage: str | None = None,
        sampler: Any = None,
        pruner: Any = None,
        top_trials: int = 5,
    ) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(
                f"hydra.sweeper.direction={direction}: use `maximize` or `minimize` (the "
                "search optimises one metric, `optimized_metric`)."
            )
        if n_trials < 1 or n_jobs < 1:
            raise ValueError("hydra.sweeper.n_trials and hydra.sweeper.n_jobs must be at least 1")
        self.params = OmegaConf.to_container(params) if isinstance(params, DictConfig) else params
        self.direction = direction
        self.n_trials = n_trials
        self.n_jobs = n_jobs  # trials per launch: parallel for launchers that run jobs at once
        self.study_name = study_name
        self.storage = storage
        self.sampler = sampler  # instantiated by Hydra from the config's _target_
        self.pruner = pruner  # null: never prune
        self.top_trials = top_trials

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Study:
        from optuna.trial import TrialState

        space = search_space(self.params, arguments, self.hydra_context.config_loader)
        metric = str(self.config.get("optimized_metric", "objective"))
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        study = self._study()
        fail_interrupted_trials(study)
        while (left := self.n_trials - len(finished_trials(study))) > 0:
            trials = [study.ask(space.distributions) for _ in range(min(self.n_jobs, left))]
            returns = self._run(study, trials, space)
            for trial, job_return in zip(trials, returns, strict=True):
                state = self._tell(study, trial, job_return)
                print(trial_summary(study, trial.number, metric), flush=True)
                if state == TrialState.FAIL:
                    job_return.return_value  # noqa: B018 - raises the job's own error
        report(study, sweep_dir, metric, self.top_trials)
        return study

    def _study(self) -> Study:
        import optuna

        return optuna.create_study(
            study_name=self.study_name,
            storage=self.storage,
            sampler=self.sampler,
            pruner=self.pruner or optuna.pruners.NopPruner(),
            direction=self.direction,
            load_if_exists=True,
        )

    def _run(self, study: Study, trials: Sequence[Trial], space: SearchSpace) -> list[JobReturn]:
        """Launch the trials as jobs numbered by trial, with their trials handed to the jobs."""
        from optuna.trial import TrialState

        from my_project.machinery.callbacks.optuna_pruning import TrialOfJob, trials_for_jobs

        self.jobs = {trial.number: TrialOfJob(trial) for trial in trials}
        overrides = [space.overrides(trial.params) for trial in trials]
        try:
            with trials_for_jobs(self.jobs):
                returns = self.launcher.launch(overrides, initial_job_idx=trials[0].number)
        except BaseException:  # the job's error, Ctrl-C: the trials did not finish
            for trial in trials:
                study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        return list(returns)

    def _tell(self, study: Study, trial: Trial, job_return: JobReturn) -> Any:
        """Record the job's outcome as the trial's: complete, pruned or failed."""
        from optuna.trial import TrialState

        if job_return.hydra_cfg is not None:
            run_dir = job_return.hydra_cfg.hydra.runtime.output_dir
            trial.set_user_attr(RUN_DIR_ATTR, str(run_dir))
        if job_return.status != JobStatus.COMPLETED:
            study.tell(trial, state=TrialState.FAIL)
            return TrialState.FAIL
        if self.jobs[trial.number].pruned_at_epoch is not None:
            study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        value = job_return.return_value
        if value is None or not math.isfinite(float(value)):
            study.tell(trial, state=TrialState.FAIL)
            metric = self.config.get("optimized_metric")
            raise ValueError(
                f"Trial {trial.number} returned {value} for optimized_metric={metric}: "
                "set `optimized_metric` to a metric the run writes to metrics.json."
            )
        study.tell(trial, float(value))
        return TrialState.COMPLETE


def finished_trials(study: Study) -> list[Any]:
    """The trials that count towards ``n_trials``: complete or pruned."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def fail_interrupted_trials(study: Study) -> None:
    """Trials left running by a search that was killed: failed, so they do not count."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
        print(
            f"Trial {trial.number} was interrupted when this search last stopped: marked "
            "failed (its run directory stays); the search goes on.",
            flush=True,
        )


def trial_summary(study: Study, number: int, metric: str) -> str:
    """One line per finished trial: its state, value and parameters."""
    trial = study.get_trials(deepcopy=False)[number]
    params = ", ".join(f"{key}={value}" for key, value in trial.params.items())
    value = "" if trial.value is None else f" {metric}={trial.value:.4g}"
    return f"Trial {number} {trial.state.name.lower()}:{value} ({params})"
