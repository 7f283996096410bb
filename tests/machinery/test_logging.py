"""Loggers: a real wandb run, offline by itself without credentials; CSV and TensorBoard."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import DOCS_STYLE, clean_env, read_wandb_records, run_entry


def history_keys(run_file: Path) -> dict[str, float]:
    values: dict[str, float] = {}
    for record in read_wandb_records(run_file):
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                values[key] = item.value_json
    return values


@pytest.mark.slow
def test_wandb_without_credentials_runs_offline_and_logs_accuracy(tmp_path: Path) -> None:
    home = tmp_path / "home"  # no ~/.netrc, no key: the situation of a fresh machine
    home.mkdir()
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.max_epochs=1",
        "logger=wandb",
        f"hydra.run.dir={run_dir}",
        env=clean_env(HOME=str(home)),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "wandb sync" in output and "offline" in output
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    history = history_keys(next(runs[0].glob("run-*.wandb")))
    assert {"train_acc_epoch", "val_acc", "test_acc"} <= set(history)
    assert 0.0 < float(history["test_acc"]) <= 1.0


@pytest.mark.parametrize(
    ("logger", "expected"), [("csv", "csv/metrics.csv"), ("tensorboard", "tensorboard")]
)
@pytest.mark.slow
def test_file_loggers_write_into_the_run_directory(
    tmp_path: Path, logger: str, expected: str
) -> None:
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.max_epochs=1",
        f"logger={logger}",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / expected).exists()
    if logger == "tensorboard":
        assert any((tmp_path / expected).rglob("events.out.tfevents.*"))
