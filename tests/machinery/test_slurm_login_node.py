"""On a SLURM login node (`srun` on PATH, no job): every entry point runs without Lightning's
hint that `srun` is not used, which repeats the whole command line, and a secret typed on that
command line reaches no file of the run, whatever a library prints (wandb keeps what is printed
in its `output.log` and `run-*.wandb`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from lightning.pytorch import Callback

from . import processes
from .helpers import DOCS_STYLE, DOCS_STYLE_EVAL, ROOT, clean_env, pinned
from .serving import serving

SECRET = "Zq9Xy7Qw"
HINT = "The `srun` command is available"


class PrintsTheCommandLine(Callback):
    """A library that prints the command line once training runs (wandb has started)."""

    def on_train_start(self, *args: Any) -> None:
        print("command line:", " ".join(sys.argv), flush=True)
        print("command line:", " ".join(sys.argv), file=sys.stderr, flush=True)


@pytest.fixture
def login_node(tmp_path: Path) -> dict[str, str]:
    """The environment of a login node: an `srun` on PATH (never run here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 99\n")
    (bin_dir / "srun").chmod(0o755)
    return clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp_path))


@pytest.mark.slow
def test_on_a_login_node_no_entry_point_prints_the_srun_hint_nor_keeps_a_secret(
    login_node: dict[str, str], tmp_path: Path
) -> None:
    # `train.py` from its folder, the secret first: Lightning's hint (64 characters of the
    # command line) would hold it whole
    run_dir = tmp_path / "run"
    args = [f"+hf_token={SECRET}", *DOCS_STYLE, "trainer.max_epochs=1", "logger=default"]
    args += ["+callbacks.prints._target_=" + f"{__name__}.PrintsTheCommandLine"]
    trained = processes.run(
        [sys.executable, "train.py", *pinned([*args, f"hydra.run.dir={run_dir}"])],
        cwd=ROOT,
        env=login_node,
        timeout=300,
    )
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output[-3000:]
    assert HINT not in output
    assert "command line: " in output and SECRET not in output  # printed, masked
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert any(path.name == "output.log" for path in files)
    assert [path for path in files if SECRET.encode() in path.read_bytes()] == []

    (checkpoint,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    for script in ("eval", "predict", "export"):
        done = processes.run(
            [
                sys.executable,
                f"{script}.py",
                *pinned([*DOCS_STYLE_EVAL, f"ckpt_path={checkpoint}"]),
                f"hydra.run.dir={tmp_path / script}",
            ],
            cwd=ROOT,
            env=login_node,
            timeout=300,
        )
        assert done.returncode == 0, (script, done.stderr[-3000:])
        assert HINT not in done.stdout + done.stderr, script
    with serving(*DOCS_STYLE_EVAL, f"ckpt_path={checkpoint}", env=login_node) as server:
        assert server.request("GET", "/health") == (200, b"ok")
    assert HINT not in "".join(server.output)
