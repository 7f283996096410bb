"""A table of a multirun's runs at its end, for any sweeper (the Hydra callback
:class:`RunsTable`; an Optuna search prints its best trials instead), and the tables' layout."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from hydra.experimental.callback import Callback

if TYPE_CHECKING:
    from omegaconf import DictConfig


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``title``, then the rows in aligned columns."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "nan" if math.isnan(value) else f"{value:.4g}"
        return "" if value is None else str(value)

    cells = [[cell(value) for value in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([title, *(line.rstrip() for line in lines)])


class RunsTable(Callback):
    """At the end of a multirun, a table of its jobs: the overrides that differ between them,
    ``optimized_metric`` from each job's ``metrics.json`` (``failed`` without one), and its run
    directory. Read from the sweep folder, so it holds for any launcher."""

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
