"""An Optuna sweeper for Hydra, on Optuna's ask/tell API (Hydra's own Optuna sweeper pins
optuna<3): `python train.py -m hparams_search=mlp`, with its config keys (``params``,
``n_trials``, ``direction``, ``sampler``, ``pruner``, ``storage``, ``study_name``), and:

- pruning: each job reports its metric per epoch through the `OptunaPruning` callback, which
  finds its trial in :data:`~my_project.machinery.callbacks.optuna_pruning.TRIALS` (so jobs
  run in this process: Hydra's default launcher);
- studies that survive: by default a SQLite file in the sweep directory; ``n_trials`` counts
  finished trials (complete or pruned), so the same command with the same ``hydra.sweep.dir``
  continues a killed search, the trial it was running marked failed;
- results: a line per trial as it ends; at the end the best, printed and in
  ``best_params.yaml`` in the sweep directory.

Trial ``N`` runs in the job folder ``N`` (``hydra.job.num``). One search process per study.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import yaml
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ._search_space import SearchSpace, search_space

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import Trial


class OptunaSweeper(Sweeper):
    """Asks Optuna for ``n_trials`` trials, runs each as a Hydra job, tells it the result."""

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        direction: Literal["minimize", "maximize"] = "maximize",
        n_trials: int = 20,
        study_name: str = "search",
        storage: str | None = None,
        sampler: Any = None,  # configs with a _target_, built once the study is known
        pruner: Any = None,  # null: never prune
        enqueue: Sequence[Mapping[str, Any]] = (),  # parameter sets to run first
    ) -> None:
        self.params, self.enqueue = dict(plain(params) or {}), list(plain(enqueue))
        self.direction, self.n_trials, self.study_name = direction, n_trials, study_name
        self.storage, self.sampler, self.pruner = storage, sampler, pruner

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self._config, self._config_loader = config, hydra_context.config_loader
        self._launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Study:
        from optuna.trial import TrialState

        self.metric = str(self._config.get("optimized_metric", "objective"))
        sweep_dir = Path(self._config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        try:
            space = search_space(self.params, arguments, self._config_loader)
            study = self._study()
        except (HydraException, ValueError) as error:
            bad_input(f"The search settings (hydra.sweeper) cannot work: {error}")
        for running in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study.tell(running.number, state=TrialState.FAIL)  # a killed search's: not counted
            print(f"Trial {running.number} was interrupted: marked failed.", flush=True)
        for params in self.enqueue:  # once: a resumed search finds them in the study
            study.enqueue_trial(params, skip_if_exists=True)
        while len(finished(study)) < self.n_trials:
            trial = study.ask(space.distributions)
            state = self._run(study, trial, space)
            frozen = study.trials[trial.number]
            sampled = ", ".join(f"{key}={value}" for key, value in frozen.params.items())
            result = "" if frozen.value is None else f" {self.metric}={frozen.value:.4g}"
            print(f"Trial {trial.number} {state.name.lower()}:{result} ({sampled})", flush=True)
        if any(t.state == TrialState.COMPLETE for t in study.trials):
            best = study.best_trial
            record = {
                "metric": self.metric,
                "direction": self.direction,
                "best_value": best.value,
                "best_params": best.params,
                "best_trial": best.number,
                "run_dir": best.user_attrs.get("run_dir"),
            }
            text = yaml.safe_dump(record, sort_keys=False)
            (sweep_dir / "best_params.yaml").write_text(text)
            print(f"The best trial:\n{text}", end="", flush=True)
        print(f"Study and best parameters in {sweep_dir}", flush=True)
        return study

    def _study(self) -> Study:
        """The study in ``storage`` (created, or loaded to continue it), sampler and pruner set."""
        import optuna
        from hydra.utils import instantiate

        study = optuna.create_study(
            study_name=self.study_name,
            storage=self.storage,
            direction=self.direction,
            load_if_exists=True,
        )
        if study.direction.name.lower() != self.direction:  # Optuna keeps the stored one
            raise ValueError(
                f"the study {self.study_name!r} in {self._config.hydra.sweep.dir} was made to "
                f"{study.direction.name.lower()}: keep its direction to continue it, or start a "
                "new search in a new hydra.sweep.dir"
            )
        sampler = self.sampler
        if sampler is not None and sampler.get("seed") is not None:
            # The same seed again would replay the draws of the earlier run's trials.
            sampler = {**sampler, "seed": sampler.seed + len(study.trials)}
        study.sampler = instantiate(sampler) if sampler else optuna.samplers.TPESampler()
        study.pruner = instantiate(self.pruner) if self.pruner else optuna.pruners.NopPruner()
        return study

    def _run(self, study: Study, trial: Trial, space: SearchSpace) -> Any:
        """Launch the trial as the job of its number, handed its trial; tell Optuna how it
        ended (complete, pruned or failed) and return that; a failed job's error is raised."""
        from optuna.trial import TrialState

        from my_project.machinery.callbacks import optuna_pruning

        optuna_pruning.TRIALS[trial.number] = trial
        try:
            (done,) = self._launcher.launch(
                [space.overrides(trial.params)], initial_job_idx=trial.number
            )
        except BaseException:  # a job's error, Ctrl-C: the trial did not finish
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        finally:
            optuna_pruning.TRIALS.pop(trial.number, None)
        if done.hydra_cfg is not None:
            trial.set_user_attr("run_dir", str(done.hydra_cfg.hydra.runtime.output_dir))
        if done.status != JobStatus.COMPLETED:
            study.tell(trial, state=TrialState.FAIL)
            done.return_value  # noqa: B018 - raises the job's own error
        if "pruned_at_epoch" in trial.user_attrs:
            study.tell(trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        if done.return_value is None or not math.isfinite(float(done.return_value)):
            study.tell(trial, state=TrialState.FAIL)
            bad_input(
                f"Trial {trial.number} ended with optimized_metric={self.metric} = "
                f"{done.return_value}: set `optimized_metric` to a finite metric the run writes "
                "to metrics.json (e.g. val/acc_best, val/loss)."
            )
        study.tell(trial, float(done.return_value))
        return TrialState.COMPLETE


def finished(study: Study) -> list[Any]:
    """The trials that count towards ``n_trials``: complete or pruned."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def bad_input(message: str) -> NoReturn:
    """Search settings that cannot work: one paragraph and exit status 2, as the entry points."""
    print(f"\nError: {message}\n", file=sys.stderr, flush=True)
    raise SystemExit(2)


def plain(value: Any) -> Any:
    """A config as plain Python values, as Optuna stores them."""
    return OmegaConf.to_object(value) if OmegaConf.is_config(value) else value
