"""The command line as a user meets it: help, bad overrides, missing files, installed use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .helpers import DOCS_STYLE, DOCS_STYLE_EVAL, FAST, clean_env, run_entry


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
    result = run_entry("train", *DOCS_STYLE, "logger=tensorbored", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "logger" in result.stderr and "tensorboard" in result.stderr and "csv" in result.stderr


def test_non_numeric_max_epochs_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_entry("train", *DOCS_STYLE, "trainer.max_epochs=abc", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 2
    assert "`trainer.max_epochs='abc'` must be an integer or null" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_checkpoint_path_is_reported_before_training(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "last.ckpt"
    run_dir = tmp_path / "run"
    result = run_entry(
        "train", *DOCS_STYLE, *FAST, f"ckpt_path={missing}", f"hydra.run.dir={run_dir}"
    )
    assert result.returncode == 2
    assert f"ckpt_path={missing} does not exist" in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_eval_without_checkpoint_says_how_to_pass_one(tmp_path: Path) -> None:
    result = run_entry("eval", *DOCS_STYLE_EVAL, f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "ckpt_path" in result.stderr
