"""Optuna's own plots of a search, as PNG files in its sweep directory: something to look at
rather than read (matplotlib, which the project has; Optuna's plotly plots would need plotly)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optuna import Study

PLOTS = ("optimization_history.png", "param_importances.png", "intermediate_values.png")


def save_plots(study: Study, sweep_dir: Path, metric: str) -> dict[str, str]:
    """Draw each of `PLOTS` into ``sweep_dir``: the metric of each trial and the best so far,
    how much each parameter mattered (fANOVA), and each trial's
    metric per epoch (where the pruned ones stopped). Returns why a plot was not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.exceptions import ExperimentalWarning
    from optuna.trial import TrialState
    from optuna.visualization import matplotlib as plots

    drawings = {
        PLOTS[0]: lambda: plots.plot_optimization_history(study, target_name=metric),
        PLOTS[1]: lambda: plots.plot_param_importances(study, target_name=metric),
        PLOTS[2]: lambda: plots.plot_intermediate_values(study),
    }
    problems = {}
    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        problems = {name: "not drawn (no trial completed)" for name in PLOTS}
    elif not any(trial.intermediate_values for trial in study.get_trials(deepcopy=False)):
        problems[PLOTS[2]] = "not drawn (no trial reported a value per epoch: no pruning)"
    for name, draw in drawings.items():
        if name in problems:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExperimentalWarning)
                axes = draw()
        except (ValueError, RuntimeError, ZeroDivisionError) as error:  # too few trials
            problems[name] = f"not drawn ({error})"
            continue
        if name == PLOTS[2]:
            axes.set(xlabel="epoch", ylabel=metric)  # what the pruning callback reports
        figure: Any = axes.figure
        figure.set_size_inches(8, 5)
        figure.savefig(sweep_dir / name, dpi=110, bbox_inches="tight")
        plt.close(figure)
    return problems
