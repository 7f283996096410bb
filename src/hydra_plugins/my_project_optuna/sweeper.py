"""An Optuna sweeper for Hydra, on Optuna's ask/tell API (Hydra's own Optuna sweeper pins
optuna<3): `python train.py -m hparams_search=mlp`, with its config keys (``params``,
``n_trials``, ``direction``, ``sampler``, ``storage``, ``study_name``), and:

- pruning: each job reports its metric per epoch through the `OptunaPruning` callback, which
  finds its trial through :func:`~my_project.machinery.callbacks.optuna_pruning.trials_for_jobs`
  (so jobs run in this process: Hydra's default launcher);
- studies that survive: by default a SQLite file in the sweep directory; ``n_trials`` counts
  finished trials (complete or pruned), so the same command with the same ``hydra.sweep.dir``
  continues a killed search, the trial it was running marked failed;
- results: the best trials printed, ``best_params.yaml`` and plots (``_report.py``).

Trial ``N`` runs in the job folder ``N`` (``hydra.job.num``). One search process per study.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ._report import RUN_DIR_ATTR, finished_trials, report
from ._search_space import SearchSpace, search_space

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial, Trial

    from my_project.machinery.callbacks.optuna_pruning import TrialOfJob

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
        enqueue: Sequence[Mapping[str, Any]] = (),
        top_trials: int = 5,
    ) -> None:
        if direction not in DIRECTIONS:
            bad_input(
                f"hydra.sweeper.direction={direction}: use `maximize` or `minimize` (a search "
                "optimises one metric, `optimized_metric`)."
            )
        if n_trials < 1 or n_jobs < 1:
            bad_input(
                f"hydra.sweeper.n_trials={n_trials}, hydra.sweeper.n_jobs={n_jobs}: both must "
                "be at least 1."
            )
        self.params = plain(params or {})
        self.direction = direction
        self.n_trials = n_trials
        self.n_jobs = n_jobs  # trials per launch: parallel for launchers that run jobs at once
        self.study_name = study_name
        self.storage = storage
        self.sampler = sampler  # configs with a _target_, built in `_study`
        self.pruner = pruner  # null: never prune
        self.enqueue = [plain(params) for params in enqueue]  # parameter sets to run first
        self.top_trials = top_trials

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self._config, self._config_loader = config, hydra_context.config_loader
        self._launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Study:
        from optuna.trial import TrialState

        try:
            space = search_space(self.params, arguments, self._config_loader)
        except (HydraException, ValueError) as error:
            bad_input(f"The search space (hydra.sweeper.params) does not parse: {error}")
        self.metric = str(self._config.get("optimized_metric", "objective"))
        sweep_dir = Path(self._config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        study = self._study()
        fail_interrupted_trials(study)
        for params in self.enqueue:  # once: a resumed search finds them in the study
            study.enqueue_trial(params, skip_if_exists=True)
        while (left := self.n_trials - len(finished_trials(study))) > 0:
            trials = [study.ask(space.distributions) for _ in range(min(self.n_jobs, left))]
            for job, job_return in self._run(study, trials, space):
                state = self._tell(study, job, job_return)
                print(trial_summary(study.trials[job.trial.number], self.metric), flush=True)
                if state == TrialState.FAIL:
                    job_return.return_value  # noqa: B018 - raises the job's own error
        report(study, sweep_dir, self.metric, self.top_trials)
        return study

    def _study(self) -> Study:
        """The study in ``storage`` (created, or loaded to continue it), sampler and pruner set."""
        import optuna
        from hydra.utils import instantiate
        from optuna.study import StudyDirection

        study = optuna.create_study(
            study_name=self.study_name,
            storage=self.storage,
            direction=StudyDirection[self.direction.upper()],
            load_if_exists=True,
        )
        if study.direction.name.lower() != self.direction:  # Optuna keeps the stored one
            bad_input(
                f"The study {self.study_name!r} in {self._config.hydra.sweep.dir} was made to "
                f"{study.direction.name.lower()}, not to {self.direction}: keep its direction "
                "to continue it, or start a new search in a new hydra.sweep.dir."
            )
        sampler = self.sampler
        if sampler is not None and sampler.get("seed") is not None:
            # The same seed again would replay the draws of the earlier run's trials.
            sampler = {**sampler, "seed": sampler.seed + len(study.trials)}
        study.sampler = instantiate(sampler) if sampler else optuna.samplers.TPESampler()
        study.pruner = instantiate(self.pruner) if self.pruner else optuna.pruners.NopPruner()
        return study

    def _run(
        self, study: Study, trials: Sequence[Trial], space: SearchSpace
    ) -> list[tuple[TrialOfJob, JobReturn]]:
        """Launch the trials as jobs numbered by trial, with their trials handed to the jobs."""
        from optuna.trial import TrialState

        from my_project.machinery.callbacks import optuna_pruning

        jobs = {trial.number: optuna_pruning.TrialOfJob(trial) for trial in trials}
        overrides = [space.overrides(trial.params) for trial in trials]
        try:
            with optuna_pruning.trials_for_jobs(jobs):
                returns = self._launcher.launch(overrides, initial_job_idx=trials[0].number)
        except BaseException:  # a job's error, Ctrl-C: the trials did not finish
            for trial in trials:
                study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        return list(zip(jobs.values(), returns, strict=True))

    def _tell(self, study: Study, job: TrialOfJob, job_return: JobReturn) -> Any:
        """Record the job's outcome as its trial's: complete, pruned or failed."""
        from optuna.trial import TrialState

        trial = job.trial
        if job_return.hydra_cfg is not None:
            trial.set_user_attr(RUN_DIR_ATTR, str(job_return.hydra_cfg.hydra.runtime.output_dir))
        if job_return.status != JobStatus.COMPLETED:
            study.tell(trial, state=TrialState.FAIL)
            return TrialState.FAIL
        if job.pruned_at_epoch is not None:
            study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        value = job_return.return_value
        if value is None or not math.isfinite(float(value)):
            study.tell(trial, state=TrialState.FAIL)
            bad_input(
                f"Trial {trial.number} ended with optimized_metric={self.metric} = {value}: "
                "set `optimized_metric` to a finite metric the run writes to metrics.json "
                "(e.g. val/acc_best, val/loss)."
            )
        study.tell(trial, float(value))
        return TrialState.COMPLETE


def bad_input(message: str) -> NoReturn:
    """Search settings that cannot work: one paragraph and exit status 2, as the entry points."""
    print(f"\nError: {message}\n", file=sys.stderr, flush=True)
    raise SystemExit(2)


def plain(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping as plain Python values, as Optuna stores them."""
    return {
        str(key): OmegaConf.to_object(value) if OmegaConf.is_config(value) else value
        for key, value in mapping.items()
    }


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


def trial_summary(trial: FrozenTrial, metric: str) -> str:
    """One line per finished trial: its state, value and parameters."""
    params = ", ".join(f"{key}={value}" for key, value in trial.params.items())
    value = "" if trial.value is None else f" {metric}={trial.value:.4g}"
    return f"Trial {trial.number} {trial.state.name.lower()}:{value} ({params})"
