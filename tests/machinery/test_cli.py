"""The command line as a user meets it: help, bad overrides, missing files, installed use."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    FAST,
    LOG_DIR_VAR,
    ROOT,
    clean_env,
    pinned,
    run_entry,
)


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


SIGNALLED = """
import os, signal, sys
import {module} as patched
original = patched.{name}

def signalled(*args, **kwargs):
    result = original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return result

patched.{name} = signalled
sys.argv = ["train.py", *sys.argv[1:]]
from my_project.machinery.run.train import main
main()
"""


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("hydra.core.utils", "_save_config"),
        (
            "my_project.machinery.run.build",
            "masked_config",
        ),
        (  # before the handlers are set up
            "my_project.machinery.run.entry",
            "shown_path",
        ),
    ],
    ids=["before the job starts", "while the job builds", "as the job prints its first line"],
)
def test_a_sigterm_before_training_ends_in_one_line_and_leaves_no_run_directory(
    module: str, name: str, tmp_path: Path
) -> None:
    """Hydra has written the run directory's `.hydra/` (or the job is building the objects):
    the signal ends the run there, says so, and takes the directory with it."""
    code = SIGNALLED.format(module=module, name=name)
    result = subprocess.run(
        [sys.executable, "-c", code, *pinned([*DOCS_STYLE, *FAST])],
        capture_output=True,
        text=True,
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path / "logs")}),
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Stopped by SIGTERM"), result.stderr[-3000:]
    assert not (tmp_path / "logs").exists(), sorted((tmp_path / "logs").rglob("*"))


def test_the_next_steps_name_each_entry_point_as_this_one_was_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`python train.py` -> `python eval.py`; a console script -> its sibling; a path with a
    blank quoted, as a shell needs it (`record.command`)."""
    from my_project.machinery.run.record import command

    monkeypatch.chdir(tmp_path)
    for argv0, expected in (
        ("train.py", "python eval.py"),
        (str(tmp_path / "my dir" / "train.py"), "python 'my dir/eval.py'"),  # relative
        (
            "/venv/bin/my-project-train",  # its own line: a generated project's name may be long
            "my-project-eval",
        ),
    ):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert command("eval") == expected
