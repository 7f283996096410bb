"""Resume does what was asked: more epochs train every epoch, a finished run keeps its record.

Real `python train.py` runs of the example project on the CPU, seeded and deterministic, so a
resumed run can be compared bit for bit with one that asked for the same from the start.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import torch

from ..machinery.helpers import read_metrics, run_entry
from .example import TRAIN_CLASSIFIER

RUN = [
    *TRAIN_CLASSIFIER,
    "logger=csv",
    "trainer.deterministic=true",
    "seed=7",
    # The learning rate of every epoch, in csv/metrics.csv as `lr-AdamW`.
    "+callbacks.lr_monitor._target_=lightning.pytorch.callbacks.LearningRateMonitor",
    "+callbacks.lr_monitor.logging_interval=epoch",
]


def train(run_dir: Path, *overrides: str) -> str:
    result = run_entry("train", *RUN, *overrides, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def resume(run_dir: Path, *overrides: str) -> str:
    result = run_entry("train", f"resume={run_dir}", *overrides)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def per_epoch(run_dir: Path, column: str) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as handle:
        return [float(row[column]) for row in csv.DictReader(handle) if row.get(column)]


def weights(run_dir: Path, name: str = "last.ckpt") -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of one epoch (copied by each test that resumes it)."""
    run_dir = tmp_path_factory.mktemp("one_epoch") / "run"
    train(run_dir, "trainer.max_epochs=1")
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


@pytest.mark.slow
def test_resume_with_more_epochs_trains_every_epoch_as_a_run_that_asked_for_them(
    one_epoch: Path, tmp_path: Path
) -> None:
    run_dir = copy_of(one_epoch, tmp_path)
    output = resume(run_dir, "trainer.max_epochs=3")
    assert "with this run's optimizer settings and learning-rate schedules" in output

    val_acc, val_loss = per_epoch(run_dir, "val/acc"), per_epoch(run_dir, "val/loss")
    assert len(val_acc) == len(val_loss) == 3
    assert len(set(val_acc)) == 3 and len(set(val_loss)) == 3, (val_acc, val_loss)
    rates = per_epoch(run_dir, "lr-AdamW")
    assert len(rates) == 3 and all(rate > 0 for rate in rates), rates

    reference = tmp_path / "three_epochs"
    train(reference, "trainer.max_epochs=3")
    assert read_metrics(run_dir) == read_metrics(reference)
    assert per_epoch(run_dir, "lr-AdamW") == per_epoch(reference, "lr-AdamW")
    got, want = weights(run_dir), weights(reference)
    assert all(torch.equal(got[key], value) for key, value in want.items())


@pytest.mark.slow
def test_lightning_hydra_templates_resume_test_holds(one_epoch: Path, tmp_path: Path) -> None:
    """lightning-hydra-template's `test_train_resume`: train 1 epoch, continue from its
    last.ckpt to 2 epochs in a new run: epoch_001.ckpt exists, accuracy improved."""
    new_run = tmp_path / "continued"
    train(new_run, "trainer.max_epochs=2", f"ckpt_path={one_epoch / 'checkpoints' / 'last.ckpt'}")
    saved = {path.name for path in (new_run / "checkpoints").iterdir()}
    assert "epoch_001.ckpt" in saved and "epoch_002.ckpt" not in saved
    before, after = read_metrics(one_epoch), read_metrics(new_run)
    assert before["train/acc"] < after["train/acc"]
    assert before["val/acc"] < after["val/acc"]


@pytest.mark.slow
def test_resuming_a_finished_run_keeps_its_train_and_val_metrics(
    one_epoch: Path, tmp_path: Path
) -> None:
    run_dir = copy_of(one_epoch, tmp_path)
    before = read_metrics(run_dir)
    assert {"train/acc", "train/loss", "val/acc", "val/loss", "val/acc_best"} <= before.keys()
    output = resume(run_dir)  # nothing left to train: it tests again, and says so
    assert "has trained all 1: nothing to train, only the test runs." in output
    assert read_metrics(run_dir) == before
    assert all(torch.equal(weights(run_dir)[k], v) for k, v in weights(one_epoch).items())
