"""What an offline wandb run recorded: its config, tags, group, history, files and artifacts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .helpers import read_wandb_records


@dataclass
class WandbRun:
    directory: Path
    run_id: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: dict[str, Any] = field(default_factory=dict)  # last value of each key
    files: list[str] = field(default_factory=list)
    artifacts: list[Any] = field(default_factory=list)
    exit_code: int | None = None


def offline_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def read_wandb_run(directory: Path) -> WandbRun:
    """Replay the records of an `offline-run-*` folder's `.wandb` file."""
    run = WandbRun(directory)
    for record in read_wandb_records(next(directory.glob("run-*.wandb"))):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.group = record.run.run_id, record.run.run_group
            run.tags = list(record.run.tags)
            updates = record.run.config.update
        elif kind == "config":
            updates = record.config.update
        else:
            updates = []
        for item in updates:
            run.config[item.key] = json.loads(item.value_json)
        if kind == "history":
            for item in record.history.item:
                run.history[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "files":
            run.files += [f.path for f in record.files.files]
        elif kind == "artifact":
            run.artifacts.append(record.artifact)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run
