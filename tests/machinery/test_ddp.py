"""Real multi-process DDP on the CPU (gloo): `trainer.devices=2`, exact test metrics, torchrun, `-m`,
on a team's own module and data module (docs_style.py: plain DataLoaders, `self.log`).

Each run starts two Python processes on a shared 2-core machine, so epochs are tiny and
timeouts generous.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import N_TEST
from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    LOG_DIR_VAR,
    ON_CPU,
    ROOT,
    clean_env,
    read_metrics,
    run_entry,
)


def runs_under(log_dir: Path) -> list[Path]:
    """Every directory some process made a run of (metrics or not)."""
    return sorted(p.parent for p in log_dir.rglob(".hydra")) + sorted(
        p.parent for p in log_dir.rglob("train.log") if not (p.parent / ".hydra").exists()
    )


@pytest.mark.slow
def test_two_devices_on_cpu_leave_one_run_directory_with_one_of_each_output(
    ddp_docs_run: Path,
) -> None:
    runs = runs_under(ddp_docs_run.parents[2])  # the log folder
    assert runs == [ddp_docs_run]
    run = runs[0]
    assert [p.name for p in run.rglob("metrics.json")] == ["metrics.json"]
    assert len(list((run / "wandb").glob("offline-run-*"))) == 1  # one wandb run, not one per rank
    for name in (
        "config.yaml",
        "learning_curves.png",
        "confusion_matrix.png",
        "checkpoints/last.ckpt",
    ):
        assert (run / name).is_file(), name
    assert read_metrics(run)["test_acc"] > 0.5


@pytest.mark.slow
def test_ddp_does_not_warn_of_padding_it_does_not_do(ddp_docs_run: Path) -> None:
    """Lightning warns that its DistributedSampler repeats test samples; the strategy replaces
    that sampler (the test below), so the warning would only mislead."""
    stderr = (ddp_docs_run.parents[3] / "stderr.txt").read_text()
    assert "Using `DistributedSampler` with the dataloaders" not in stderr
    assert "Starting with 2 processes" in stderr  # what Lightning says about the run stays


def evaluate_best_checkpoint(run: Path, out: Path, *overrides: str) -> dict[str, float]:
    """`python eval.py ckpt_path=<the run's best checkpoint>` on the test set of prime size."""
    best = next((run / "checkpoints").glob("epoch_*.ckpt"))
    result = run_entry(
        "eval",
        *DOCS_STYLE_EVAL,
        *overrides,
        f"ckpt_path={best}",
        f"data.test_size={N_TEST}",
        "logger=none",
        f"hydra.run.dir={out}",
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (out / "stderr.txt").write_text(result.stderr)
    return read_metrics(out)


@pytest.fixture(scope="module")
def evaluated_in_one_process(
    ddp_docs_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, float]:
    """A one-process evaluation of the DDP run's best checkpoint: the reference."""
    return evaluate_best_checkpoint(ddp_docs_run, tmp_path_factory.mktemp("eval_one"))


@pytest.mark.slow
def test_ddp_test_metrics_count_each_test_sample_once(
    ddp_docs_run: Path, evaluated_in_one_process: dict[str, float]
) -> None:
    """The DDP run's test metrics equal a one-process evaluation of the same checkpoint, on a
    test set of prime size: the accuracy (torchmetrics) exactly, the loss (`self.log` with
    `sync_dist=True`, weighted by each rank's samples) to float precision, and so the error rate
    the module logs without `sync_dist` (each process's mean: the whole set's, not rank 0's)."""
    run = ddp_docs_run
    ddp, single = read_metrics(run), evaluated_in_one_process
    assert single["test_acc"] == ddp["test_acc"]
    assert single["test_loss"] == pytest.approx(ddp["test_loss"], rel=1e-6)
    assert single["test_error"] == pytest.approx(ddp["test_error"], rel=1e-6)
    wrong = ddp["test_error"] * N_TEST  # a count of the 89 samples, not of rank 0's 45
    assert wrong == pytest.approx(round(wrong), abs=1e-4)
    stderr = (run.parents[3] / "stderr.txt").read_text()
    assert "self.log('test_error', ..., sync_dist=True)" not in stderr  # Lightning's warning
    assert "rank 0's alone" not in stderr


@pytest.mark.slow
def test_eval_with_two_devices_gives_the_whole_test_sets_metrics(
    ddp_docs_run: Path, evaluated_in_one_process: dict[str, float], tmp_path: Path
) -> None:
    """`python eval.py ckpt_path=... trainer.devices=2` as a one-process evaluation: the error
    rate the module logs without `sync_dist` too (the whole set's, not rank 0's 45 samples)."""
    ddp = evaluate_best_checkpoint(ddp_docs_run, tmp_path, "trainer=ddp_cpu", "trainer.devices=2")
    single = evaluated_in_one_process
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Starting with 2 processes" in stderr
    assert "self.log('test_error', ..., sync_dist=True)" not in stderr  # Lightning's warning
    assert ddp["test_acc"] == single["test_acc"]
    assert ddp["test_loss"] == pytest.approx(single["test_loss"], rel=1e-6)
    assert ddp["test_error"] == pytest.approx(single["test_error"], rel=1e-6)
    wrong = ddp["test_error"] * N_TEST  # a count of the 89 samples, not of rank 0's 45
    assert wrong == pytest.approx(round(wrong), abs=1e-4)


@pytest.mark.slow
def test_torchrun_on_cpu_makes_one_run_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(ROOT / "train.py"),
            *ON_CPU,
            *DOCS_STYLE,
            "trainer.devices=2",
            "trainer.max_epochs=1",
            "logger=csv",
            "callbacks=none",
        ],
        cwd=ROOT,
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    runs = runs_under(tmp_path)
    assert len(runs) == 1, runs  # both ranks agreed on one timestamped directory
    # ... and only the first rank created one (no empty `<time>_1` beside it)
    assert list((tmp_path / "train" / "runs").iterdir()) == runs
    assert read_metrics(runs[0])["test_acc"] > 0.3
    assert result.stdout.count("CONFIG") == 1  # the config tree comes from rank 0 only


@pytest.mark.exhaustive  # DDP jobs of a multirun in the slow tier: test_sweeps.py's DDP trials
def test_multirun_with_two_devices_runs_each_job_as_one_ddp_run(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        "-m",
        *DOCS_STYLE,
        "trainer.devices=2",
        "trainer.max_epochs=1",
        "model.lr=0.003,0.02",
        "logger=csv",
        "callbacks=none",
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path)}),
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert (
        result.stdout.count("Starting with 2 processes")
        + result.stderr.count("Starting with 2 processes")
        == 2
    )
    runs = runs_under(tmp_path)
    assert [run.name for run in runs] == ["0", "1"], runs  # no stray runs or nested sweeps
    for run, lr in zip(runs, ("0.003", "0.02"), strict=True):
        assert f"model.lr={lr}" in (run / ".hydra" / "overrides.yaml").read_text()
        assert read_metrics(run)["test_acc"] > 0.1
