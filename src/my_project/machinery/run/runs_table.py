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
        rows = [["job", *varying, metric, "run dir"]]
        for job, values in zip(jobs, given, strict=True):
            path = job / "metrics.json"
            result = json.loads(path.read_text()).get(metric) if path.is_file() else "failed"
            shown = f"{result:.4g}" if isinstance(result, float) else str(result)
            rows.append([job.name, *(str(values.get(key, "")) for key in varying), shown, str(job)])
        if len(rows) > 1:
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
            print(f"\n{len(jobs)} runs of this multirun:", *(x.rstrip() for x in lines), sep="\n")
