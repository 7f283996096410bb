"""A multirun's last lines: a table of its runs. Hydra prints each job's overrides
as it launches and nothing at the end; this Hydra callback reads the sweep folder, so it holds
for any launcher. An Optuna search prints its own summary instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class RunsTable(Callback):
    """The overrides that differ between the jobs, each job's ``optimized_metric`` from its
    ``metrics.json`` (``failed`` without one) and its run directory."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from ..distributed import is_rank_zero

        if "OptunaSweeper" in str(config.hydra.sweeper.get("_target_")) or not is_rank_zero():
            return
        sweep = Path(config.hydra.sweep.dir)
        jobs = sorted(
            (p for p in sweep.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()),
            key=lambda p: (len(p.name), p.name),
        )
        given = [
            dict(o.split("=", 1) for o in yaml.safe_load(p.read_text()) or [] if "=" in o)
            for p in (job / ".hydra" / "overrides.yaml" for job in jobs)
        ]
        keys = dict.fromkeys(key for values in given for key in values)
        varying = [key for key in keys if len({values.get(key) for values in given}) > 1]
        metric = str(config.get("optimized_metric") or "")
        rows = [["job", *varying, metric or "optimized_metric", "run dir"]]
        logged: list[set[str]] = []  # the metrics of the runs without `optimized_metric`
        for job, values in zip(jobs, given, strict=True):
            path = job / "metrics.json"
            recorded = json.loads(path.read_text()) if path.is_file() else None
            result = "failed" if recorded is None else recorded.get(metric, "not logged")
            if recorded is not None and metric not in recorded:
                logged.append(set(recorded))
            shown = f"{result:.4g}" if isinstance(result, float) else str(result)
            rows.append([job.name, *(str(values.get(key, "")) for key in varying), shown, str(job)])
        if len(rows) > 1:
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
            print(f"\n{len(jobs)} runs of this multirun:", *(x.rstrip() for x in lines), sep="\n")
        if logged:
            finished = sum((job / "metrics.json").is_file() for job in jobs)
            print(_not_logged(metric, logged, finished))


def _not_logged(metric: str, logged: list[set[str]], finished: int) -> str:
    """What to set when ``optimized_metric`` is none of the metrics the runs logged."""
    names = sorted(set.intersection(*logged)) or sorted(set.union(*logged))
    runs = "any of the runs" if len(logged) == finished else f"{len(logged)} of the runs"
    problem = (
        f"`optimized_metric={metric}` was not logged by {runs}"
        if metric
        else "`optimized_metric` is not set, so the table shows no result"
    )
    example = f" (e.g. `optimized_metric={names[0]}`)" if names else ""
    return (
        f"Note: {problem}; their metrics.json holds {', '.join(names) or 'nothing'}. Set "
        f"`optimized_metric` to the metric to compare the runs by{example}, in the experiment's "
        "config or on the command line."
    )
