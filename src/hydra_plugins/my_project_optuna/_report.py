"""What a search leaves to look at: the best trials printed, best_params.yaml, PNG plots."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial

RUN_DIR_ATTR = "run_dir"  # the trial's run directory, kept in the study with each trial


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
    header = ["trial", "state", metric, *keys, "run dir"]
    rows = [
        [
            str(t.number),
            t.state.name.lower(),
            _number(t.value),
            *(_number(t.params.get(key, "")) for key in keys),
            str(t.user_attrs.get(RUN_DIR_ATTR, "")),
        ]
        for t in finished[:top]
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]
    counts = {state: 0 for state in ("complete", "pruned", "fail")}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
    title = (
        f"Best of {len(finished)} trials ({study.direction.name.lower()} {metric}; "
        + ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        + "):"
    )
    return "\n".join([title, *(line.rstrip() for line in lines)])


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value)


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

    drawings: dict[str, Callable[[], Any]] = {
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
        figure = axes.figure
        figure.set_size_inches(8, 5)
        figure.savefig(sweep_dir / name, dpi=110, bbox_inches="tight")
        plt.close(figure)
    return problems
