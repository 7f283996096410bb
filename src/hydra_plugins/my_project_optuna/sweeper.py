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
    from optuna.trial import Trial


class OptunaSweeper(Sweeper):
    """Asks Optuna for ``n_trials`` trials, runs each as a Hydra job, tells it the result."""

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        direction: str = "maximize",
        n_trials: int = 20,
        study_name: str = "search",
        storage: str | None = None,
        sampler: Any = None,  # configs with a _target_, built once the study is known
        pruner: Any = None,  # null: never prune
        enqueue: Sequence[Mapping[str, Any]] = (),  # parameter sets to run first
        top_trials: int = 5,
    ) -> None:
        if direction not in ("minimize", "maximize") or n_trials < 1:
            bad_input(
                f"hydra.sweeper.direction={direction}, hydra.sweeper.n_trials={n_trials}: use "
                "`maximize` or `minimize` (of `optimized_metric`), and at least one trial."
            )
        self.params, self.enqueue = plain(params or {}), [plain(p) for p in enqueue]
        self.direction, self.n_trials, self.top_trials = direction, n_trials, top_trials
        self.study_name, self.storage, self.sampler, self.pruner = (
            study_name,
            storage,
            sampler,
            pruner,
        )

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
        for running in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study.tell(running.number, state=TrialState.FAIL)  # a killed search's: not counted
            print(
                f"Trial {running.number} was interrupted when this search last stopped: marked "
                "failed (its run directory stays); the search goes on.",
                flush=True,
            )
        for params in self.enqueue:  # once: a resumed search finds them in the study
            study.enqueue_trial(params, skip_if_exists=True)
        while len(finished_trials(study)) < self.n_trials:
            trial = study.ask(space.distributions)
            job_return, state = self._run(study, trial, space)
            frozen = study.trials[trial.number]
            sampled = ", ".join(f"{key}={value}" for key, value in frozen.params.items())
            result = "" if frozen.value is None else f" {self.metric}={frozen.value:.4g}"
            print(f"Trial {trial.number} {state.name.lower()}:{result} ({sampled})", flush=True)
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

    def _run(self, study: Study, trial: Trial, space: SearchSpace) -> tuple[JobReturn, Any]:
        """Launch the trial as the job of its number, handed its trial; tell Optuna how it
        ended: complete, pruned or failed."""
        from optuna.trial import TrialState

        from my_project.machinery.callbacks import optuna_pruning

        job = optuna_pruning.TrialOfJob(trial)
        try:
            with optuna_pruning.trials_for_jobs({trial.number: job}):
                (job_return,) = self._launcher.launch(
                    [space.overrides(trial.params)], initial_job_idx=trial.number
                )
        except BaseException:  # a job's error, Ctrl-C: the trial did not finish
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        if job_return.hydra_cfg is not None:
            trial.set_user_attr(RUN_DIR_ATTR, str(job_return.hydra_cfg.hydra.runtime.output_dir))
        value = job_return.return_value if job_return.status == JobStatus.COMPLETED else None
        if job_return.status != JobStatus.COMPLETED or job.pruned_at_epoch is not None:
            state = TrialState.FAIL if job.pruned_at_epoch is None else TrialState.PRUNED
            study.tell(trial, state=state)
            return job_return, state
        if value is None or not math.isfinite(float(value)):
            study.tell(trial, state=TrialState.FAIL)
            bad_input(
                f"Trial {trial.number} ended with optimized_metric={self.metric} = {value}: "
                "set `optimized_metric` to a finite metric the run writes to metrics.json "
                "(e.g. val/acc_best, val/loss)."
            )
        study.tell(trial, float(value))
        return job_return, TrialState.COMPLETE


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
