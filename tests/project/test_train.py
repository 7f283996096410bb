"""End to end: `python train.py` of the example (the project's defaults as generated) trains to
>=95% on digits, writes its outputs, resumes, evaluates."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import torch

from ..machinery import processes
from ..machinery.helpers import FAST, LOG_DIR_VAR, ROOT, clean_env, read_metrics, run_entry
from .example import TRAIN_CLASSIFIER


@pytest.fixture(scope="module")
def default_training(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One real run of the example with its default settings (all epochs), shared by the
    tests below: its run directory and what it printed on stderr and stdout."""
    run_dir = tmp_path_factory.mktemp("default_run")
    result = run_entry("train", *TRAIN_CLASSIFIER, f"hydra.run.dir={run_dir}", "logger=csv")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result.stderr, result.stdout


@pytest.fixture(scope="module")
def default_run(default_training: tuple[Path, str, str]) -> Path:
    return default_training[0]


@pytest.mark.slow
def test_default_training_shows_nothing_of_lightnings_that_is_not_about_the_run(
    default_training: tuple[Path, str, str],
) -> None:
    """Lightning 2.6 builds torch's deprecated `LeafSpec` at every step, and every Trainer
    advertises a product: nothing a user can act on, so neither is shown (entry.register)."""
    run_dir, stderr, _ = default_training
    log = (run_dir / "train.log").read_text()
    assert "LeafSpec" not in stderr
    assert "litlogger" not in stderr + log
    assert "GPU available:" in stderr + log  # what is about the run stays


@pytest.mark.slow
def test_default_training_reaches_95_percent_test_accuracy(default_run: Path) -> None:
    assert read_metrics(default_run)["test/acc"] >= 0.95


@pytest.mark.slow
def test_run_directory_holds_config_checkpoints_metrics_and_plots(default_run: Path) -> None:
    for name in (
        "config.yaml",
        ".hydra/config.yaml",
        "checkpoints/last.ckpt",
        "csv/metrics.csv",
        "metrics.json",
        "learning_curves.png",
        "confusion_matrix.png",
        "train.log",
    ):
        assert (default_run / name).is_file(), name
    for png in ("learning_curves.png", "confusion_matrix.png"):
        assert (default_run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (default_run / png).stat().st_size > 10_000
    best = list((default_run / "checkpoints").glob("epoch_*.ckpt"))
    assert len(best) == 1


@pytest.mark.slow
def test_checkpoints_load_with_weights_only(default_run: Path) -> None:
    checkpoint = torch.load(default_run / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["epoch"] == 19
    assert checkpoint["hyper_parameters"]["lr"] == pytest.approx(0.003)


@pytest.mark.slow
def test_the_printed_eval_command_gives_the_same_test_accuracy(
    default_training: tuple[Path, str, str], tmp_path: Path
) -> None:
    """A run ends with its best checkpoint, its metrics, and the commands that use that
    checkpoint (`record.next_steps`): the eval command, run exactly as printed, tests the same
    checkpoint the run tested."""
    run_dir, _, stdout = default_training
    best = next((run_dir / "checkpoints").glob("epoch_*.ckpt"))
    assert f"best checkpoint: {best} (val/acc=" in stdout
    assert f"metrics:         {run_dir / 'metrics.json'}" in stdout
    printed = [line.strip() for line in stdout.splitlines()[-5:]]
    for script in ("eval", "predict", "serve", "export"):
        assert f"python {script}.py {shlex.quote(f'ckpt_path={best}')}" in printed
    python, *args = shlex.split(next(line for line in printed if " eval.py " in line))
    assert python == "python"
    result = processes.run(  # from where train.py ran; its run directory under tmp_path
        [sys.executable, *args],
        cwd=ROOT,
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path)}),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (eval_run,) = (tmp_path / "eval" / "runs").iterdir()
    assert read_metrics(eval_run)["test/acc"] == read_metrics(run_dir)["test/acc"]


@pytest.mark.slow
def test_resume_from_last_checkpoint_ends_at_the_requested_epoch(tmp_path: Path) -> None:
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    result = run_entry("train", *TRAIN_CLASSIFIER, *FAST, "test=false", f"hydra.run.dir={first}")
    assert result.returncode == 0, result.stderr[-3000:]
    last = first / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["epoch"] == 1

    result = run_entry(
        "train",
        *TRAIN_CLASSIFIER,
        *FAST,
        "trainer.max_epochs=4",
        f"ckpt_path={last}",
        f"hydra.run.dir={resumed}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 3
    rows = (resumed / "csv" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    logged = {
        int(float(r.split(",")[header.index("epoch")]))
        for r in rows[1:]
        if r.split(",")[header.index("epoch")]
    }
    assert logged >= {2, 3} and not logged & {0, 1}
