"""What a multirun leaves to look at: a table of its runs at the end (any sweeper, through the
Hydra callback :class:`RunsTable`); for an Optuna search, the best trials, best_params.yaml and
Optuna's plots."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from hydra.experimental.callback import Callback

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from optuna import Study
    from optuna.trial import FrozenTrial

RUN_DIR_ATTR = "run_dir"  # the trial's run directory, kept in the study with each trial


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``title``, then the rows in aligned columns."""
    cells = [[_cell(value) for value in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([title, *(line.rstrip() for line in lines)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value)


class RunsTable(Callback):
    """At the end of a multirun, a table of its jobs: the overrides that differ between them,
    ``optimized_metric`` from each job's ``metrics.json`` (``failed`` without one), and its run
    directory. Read from the sweep folder, so it holds for any launcher; an Optuna search
    prints its own table (:func:`report`)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from my_project.machinery.distributed import is_rank_zero

        sweep = Path(config.hydra.sweep.dir)
        if "OptunaSweeper" in str(config.hydra.sweeper.get("_target_")) or not is_rank_zero():
            return
        jobs = sorted(
            (p for p in sweep.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()),
            key=lambda p: (len(p.name), p.name),
        )
        values = []
        for job in jobs:
            overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()) or []
            values.append(dict(o.split("=", 1) for o in overrides if "=" in o))
        keys = dict.fromkeys(key for given in values for key in given)
        varying = [k for k in keys if len({given.get(k) for given in values}) > 1]
        metric = str(config.get("optimized_metric") or "")
        rows = []
        for job, given in zip(jobs, values, strict=True):
            path = job / "metrics.json"
            result = json.loads(path.read_text()).get(metric) if path.is_file() else "failed"
            rows.append([job.name, *(given.get(k) for k in varying), result, job])
        if rows:
            header = ["job", *varying, metric, "run dir"]
            print(table(f"\n{len(rows)} runs of this multirun:", header, rows), flush=True)


def report(study: Study, sweep_dir: Path, metric: str, top: int = 5) -> None:
    """Print the best trials, write ``best_params.yaml`` and the plots into ``sweep_dir``."""
    print(best_trials_table(study, metric, top), flush=True)
    if write_best_params(study, sweep_dir / "best_params.yaml", metric) is None:
        print("No trial completed: no best_params.yaml.", flush=True)
    for name, problem in save_plots(study, sweep_dir, metric).items():
        print(f"{name}: {problem}", flush=True)
    print(f"Study, best parameters and plots in {sweep_dir}", flush=True)


def finished_trials(study: Study) -> list[FrozenTrial]:
    """The trials that count towards ``n_trials``: complete or pruned."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def best_trials_table(study: Study, metric: str, top: int = 5) -> str:
    """The ``top`` completed trials, best first (then the pruned ones, if room is left)."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    finished = finished_trials(study)
    sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
    finished.sort(key=lambda t: (t.state != TrialState.COMPLETE, sign * (t.value or 0.0), t.number))
    keys = sorted({key for trial in finished for key in trial.params})
    rows = []
    for t in finished[:top]:
        params = [t.params.get(key) for key in keys]
        rows.append(
            [t.number, t.state.name.lower(), t.value, *params, t.user_attrs.get(RUN_DIR_ATTR)]
        )
    states = [trial.state.name.lower() for trial in study.get_trials(deepcopy=False)]
    order = dict.fromkeys(("complete", "pruned", "fail", *states))
    counts = ", ".join(f"{states.count(s)} {s}" for s in order if s in states)
    title = f"Best of {len(finished)} trials ({study.direction.name.lower()} {metric}; {counts}):"
    return table(title, ["trial", "state", metric, *keys, "run dir"], rows)


def write_best_params(study: Study, path: Path, metric: str) -> Path | None:
    """``best_params.yaml``: the best completed trial, its value, parameters and run dir."""
    try:
        best = study.best_trial
    except ValueError:  # no completed trial yet
        return None
    record = {
        "metric": metric,
        "direction": study.direction.name.lower(),
        "best_value": best.value,
        "best_params": best.params,
        "best_trial": best.number,
        "run_dir": best.user_attrs.get(RUN_DIR_ATTR),
    }
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    return path


def save_plots(study: Study, sweep_dir: Path, metric: str) -> dict[str, str]:
    """Optuna's matplotlib plots as PNGs; returns the plots it could not draw, and why."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.exceptions import ExperimentalWarning
    from optuna.visualization import matplotlib as plots

    drawings = {
        "optimization_history.png": lambda: plots.plot_optimization_history(
            study, target_name=metric
        ),
        "param_importances.png": lambda: plots.plot_param_importances(study, target_name=metric),
        # each trial's metric per epoch: where the pruned ones stopped
        "intermediate_values.png": lambda: plots.plot_intermediate_values(study),
    }
    problems = {}
    for name, draw in drawings.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExperimentalWarning)
                axes = draw()
        except (ValueError, RuntimeError, ZeroDivisionError) as error:
            problems[name] = f"not drawn ({error})"
            continue
        if name == "intermediate_values.png":
            axes.set(xlabel="epoch", ylabel=metric)  # the steps the pruning callback reports
        figure: Any = axes.figure
        figure.set_size_inches(8, 5)
        figure.savefig(sweep_dir / name, dpi=110, bbox_inches="tight")
        plt.close(figure)
    return problems
