"""The command line as a user meets it: help, bad overrides, missing files, installed use."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .helpers import FAST, ON_CPU, ROOT, clean_env, run_entry


def test_help_does_not_import_torch_or_lightning() -> None:
    code = (
        "import sys; sys.argv = ['train.py', '--help']\n"
        "from my_project.machinery.run.train import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('torch', 'lightning', 'wandb', 'sklearn', 'matplotlib') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env()
    )
    assert "== Configuration groups ==" in result.stdout
    assert "HEAVY []" in result.stdout


def test_unknown_config_option_lists_the_valid_ones(tmp_path: Path) -> None:
    result = run_entry("train", "model/net=transformer", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "model/net" in result.stderr and "cnn" in result.stderr and "mlp" in result.stderr


def test_non_numeric_max_epochs_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_entry("train", "trainer.max_epochs=abc", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 2
    assert "trainer.max_epochs='abc' must be a whole number" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_checkpoint_path_is_reported_before_training(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "last.ckpt"
    result = run_entry("train", *FAST, f"ckpt_path={missing}", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2
    assert f"ckpt_path={missing} does not exist" in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_eval_without_checkpoint_says_how_to_pass_one(tmp_path: Path) -> None:
    result = run_entry("eval", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "ckpt_path" in result.stderr


@pytest.mark.slow
def test_wheel_carries_the_configs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    """A plain (non-editable) install finds its configs without the repository."""
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0 and "hatchling" in build.stderr:
        pytest.skip("hatchling is not installed in this environment")
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    package = next(n.split("/")[0] for n in names if n.endswith("/configs/train.yaml"))
    assert f"{package}/configs/model/net/cnn.yaml" in names
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            f"{package}.machinery.run.train",
            *ON_CPU,
            "debug=fdr",
            f"hydra.run.dir={elsewhere / 'run'}",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=clean_env(PYTHONPATH=str(site)),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        f"{site}" in result.stdout + result.stderr or (elsewhere / "run" / "metrics.json").is_file()
    )
