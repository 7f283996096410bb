"""An Optuna sweeper for Hydra on Optuna's ask/tell API (Hydra's own pins optuna<3):
`python train.py -m hparams_search=mlp`, its keys as configs/hydra/sweeper/optuna.yaml shows.

- the space: ``interval(low, high)`` (``int(interval(...))`` for integers), ``tag(log,
  interval(...))``; any other sweep (``choice(a, b)``, ``a,b``, ``range(...)``) is categorical;
  anything else is a value every trial gets;
- pruning: each job reports its metric per epoch through the `OptunaPruning` callback, which
  finds its trial in ``optuna_pruning.TRIALS`` (jobs run in this process);
- a study that survives: by default SQLite in the sweep directory; ``n_trials`` counts finished
  trials, so the same command continues a killed search, the trial it was running failed;
- results: a line per trial; at the end the best, printed and in ``best_params.yaml``, and
  Optuna's plots (``plots.py``).

Trial ``N`` runs in the job folder ``N`` (``hydra.job.num``). One search process per study.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import IntervalSweep, Transformer
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from .pinned_groups import overridden_choices
from .plots import PLOTS, save_plots

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from optuna import Study
    from optuna.distributions import BaseDistribution
    from optuna.trial import Trial


# The values Optuna can hold in a categorical distribution; other choices (lists, dicts)
# are kept as their override text.
_PLAIN = (str, int, float, bool)
# A run's exit status for bad input (a refused value): its trial failed, the search goes on,
# until this many trials in a row were refused (then the values they share are the likely cause).
BAD_INPUT, REFUSED_IN_A_ROW = 2, 3


class SearchSpace:
    """What each trial samples, what every trial gets as is, and how to write both back. (Not
    a dataclass: Hydra runs this module outside ``sys.modules`` when it looks for plugins.)"""

    def __init__(self) -> None:
        self.distributions: dict[str, BaseDistribution] = {}
        self.fixed: list[str] = []  # overrides every trial gets unchanged
        self.choice_texts: dict[str, dict[Any, str]] = {}  # a choice's value -> its text

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """The job's overrides: the fixed ones, then ``key=value`` for each sampled value (a
        choice's text; an int or a float as its repr, which round-trips: 1e-05, 0.0123)."""
        texts = self.choice_texts
        sampled = [f"{k}={texts[k][v] if k in texts else repr(v)}" for k, v in params.items()]
        return [*self.fixed, *sampled]


def search_space(
    params: Mapping[str, Any] | None,
    arguments: Iterable[str],
    config_loader: ConfigLoader | None = None,
) -> SearchSpace:
    """The space of ``hydra.sweeper.params`` and the command line's overrides, which replace a
    parameter of the same key (``model.lr=0.01`` fixes it; ``model.lr=interval(...)`` changes it)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    parser = OverridesParser.create(config_loader=config_loader)
    lines = {key: f"{key}={value}" for key, value in (params or {}).items()}
    for override in parser.parse_overrides(list(arguments)):
        lines.pop(override.get_key_element(), None)  # last, in the command line's order
        lines[override.get_key_element()] = override.input_line or ""
    space = SearchSpace()
    for override in parser.parse_overrides(list(lines.values())):
        key, value = override.get_key_element(), override.value()
        if not override.is_sweep_override():
            space.fixed.append(override.input_line or "")
        elif isinstance(value, IntervalSweep):
            assert value.start is not None and value.end is not None
            log = "log" in value.tags
            if isinstance(value.start, int) and isinstance(value.end, int):
                space.distributions[key] = IntDistribution(value.start, value.end, log=log)
            else:
                space.distributions[key] = FloatDistribution(value.start, value.end, log=log)
        else:  # choice(...), a,b,c, range(...), glob(...)
            texts: dict[Any, str] = {}
            for element in override.sweep_iterator():
                held = element if isinstance(element, _PLAIN) else Transformer.str(element)
                texts[held] = Transformer.str(element)
            if not texts:
                raise ValueError(f"{override.input_line} offers no value to choose from")
            space.distributions[key] = CategoricalDistribution(list(texts))
            space.choice_texts[key] = texts
    return space


class OptunaSweeper(Sweeper):
    """Asks Optuna for ``n_trials`` trials, runs each as a Hydra job, tells it the result."""

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        direction: Literal["minimize", "maximize"] = "maximize",
        n_trials: int = 20,
        study_name: str | None = "search",
        storage: str | None = None,
        sampler: Any = None,  # configs with a _target_, built once the study is known
        pruner: Any = None,  # null: never prune
        enqueue: Sequence[Mapping[str, Any]] = (),  # parameter sets to run first
        plots: bool = True,  # Optuna's, into the sweep directory at the end
        n_jobs: int = 1,  # hydra-optuna-sweeper's key (LHT's searches): trials one at a time
    ) -> None:
        self.params, self.enqueue = dict(plain(params) or {}), list(plain(enqueue))
        self.plots, self.n_jobs = plots, n_jobs
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
        """The search; refused (bad input, exit status 2) before any trial kept a run, the sweep
        folder goes again if this process made it (its study, Hydra's record)."""
        from my_project.machinery.reliability import run_dir

        if self.n_jobs != 1:
            bad_input(
                f"hydra.sweeper.n_jobs={self.n_jobs} asks for trials in parallel; this project's "
                "sweeper runs them one after another in this process (each may be a DDP run of "
                "several devices: `trainer.devices=2`). Set `n_jobs: 1` or delete the key."
            )
        sweep_dir = Path(self._config.hydra.sweep.dir)
        try:
            if (conflict := overridden_choices(self._config, self._config_loader)) is not None:
                bad_input(conflict)  # before Optuna or any trial: see pinned_groups.py
            return self._search(arguments, sweep_dir)
        except SystemExit as stop:
            if stop.code == 2 and sweep_dir.is_dir():  # a trial's folder holds a run: kept
                ours = [entry.name for entry in sweep_dir.iterdir() if not entry.name.isdigit()]
                run_dir.remove_if_untouched(sweep_dir, ours)
            raise

    def _search(self, arguments: list[str], sweep_dir: Path) -> Study:
        from optuna.trial import TrialState

        self.metric = str(self._config.get("optimized_metric", "objective"))
        if self.study_name is None:  # hydra-optuna-sweeper's `null` (LHT's): named as ours
            choice = OmegaConf.select(self._config, "hydra.runtime.choices.hparams_search")
            self.study_name = str(choice or "search")
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
        counted = (TrialState.COMPLETE, TrialState.PRUNED)  # towards n_trials
        refused: list[int] = []  # trials in a row whose values a run refused
        while len(study.get_trials(deepcopy=False, states=counted)) < self.n_trials:
            trial = study.ask(space.distributions)
            state = self._run(study, trial, space)
            frozen = study.trials[trial.number]
            sampled = ", ".join(f"{key}={value}" for key, value in frozen.params.items())
            result = "" if frozen.value is None else f" {self.metric}={frozen.value:.4g}"
            ended = state.name.lower()
            if state == TrialState.FAIL:
                ended, result = "failed", " its values were refused (the paragraph above)"
            print(f"Trial {trial.number} {ended}:{result} ({sampled})", flush=True)
            refused = [*refused, trial.number] if state == TrialState.FAIL else []
            if len(refused) == REFUSED_IN_A_ROW:
                break
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
            print(f"The best trial ({sweep_dir / 'best_params.yaml'}):\n{text}", end="", flush=True)
        if self.plots:
            problems = save_plots(study, sweep_dir, self.metric)
            drawn = ", ".join(name for name in PLOTS if name not in problems)
            print(f"Optuna's plots in {sweep_dir}: {drawn or 'none'}", flush=True)
            for name, problem in problems.items():
                print(f"  {name}: {problem}", flush=True)
        if len(refused) == REFUSED_IN_A_ROW:
            bad_input(
                f"The search stopped: trials {', '.join(map(str, refused))} in a row were "
                "refused (each one's paragraph is above), so the cause is likely a value they "
                "share rather than the sampled ones. Fix it, then run the same command (with "
                "the same hydra.sweep.dir) to continue the search; refused trials do not count "
                "towards n_trials."
            )
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
        ended (complete, pruned or failed) and return that: failed where its run refused its
        values (bad input, said in one paragraph); any other job's error is raised."""
        from optuna.trial import TrialState

        from my_project.machinery.callbacks import optuna_pruning

        optuna_pruning.TRIALS[trial.number] = trial
        try:
            (done,) = self._launcher.launch(
                [space.overrides(trial.params)], initial_job_idx=trial.number
            )
        except SystemExit as stop:
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            if stop.code == BAD_INPUT:  # its run said why and left nothing: the search goes on
                return TrialState.FAIL
            raise
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
            value, name = done.return_value, self.metric
            bad_input(f"Trial {trial.number}: {name}={value}; name a metric of metrics.json.")
        study.tell(trial, float(done.return_value))
        return TrialState.COMPLETE


def bad_input(message: str) -> NoReturn:
    """Search settings that cannot work: one paragraph and exit status 2, as the entry points."""
    print(f"\nError: {message}\n", file=sys.stderr, flush=True)
    raise SystemExit(2)


def plain(value: Any) -> Any:
    """A config as plain Python values, as Optuna stores them."""
    return OmegaConf.to_object(value) if OmegaConf.is_config(value) else value
