"""Runs that several test files only read, made once per test session.

`make test` spreads the files over one test process per core (pytest-xdist, `--dist
loadfile`); a run made here is made by whichever process asks first, and the others wait for
it and read the same files.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import DOCS_STYLE, LOG_DIR_VAR, clean_env, run_entry

# 89 test samples (a prime: no number of ranks divides it). With a batch of 32, rank 0 gets 45
# in 2 batches and rank 1 gets 44; a padding sampler would score 90, one of them twice.
N_TEST = 89
DDP_TAGS = ["docs", "smoke"]
DDP_GROUP = "my-group"


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """The folder `make` fills, once for all the session's test processes."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of one session
    folder = base / "shared" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process making it: wait for it
        if not (folder / ".done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".done").touch()
    return folder


@pytest.fixture(scope="session")
def ddp_docs_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python train.py trainer.devices=2` on the docs-style module, in the default run
    directory (under its log folder), with CSV and wandb (offline), tags and a group: the run
    directory. Its stderr is `stderr.txt` beside the log folder."""

    def make(root: Path) -> None:
        home = root / "home"
        home.mkdir()
        result = run_entry(
            "train",
            *DOCS_STYLE,
            "trainer.devices=2",
            "trainer.max_epochs=2",
            f"data.test_size={N_TEST}",
            "logger=default",  # CSV and wandb, whatever the project's default logger
            f"tags=[{','.join(DDP_TAGS)}]",
            f"logger.wandb.group={DDP_GROUP}",
            cwd=root,
            env=clean_env(HOME=str(home), **{LOG_DIR_VAR: str(root / "logs")}),
            timeout=420,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        (root / "stderr.txt").write_text(result.stderr)

    root = shared_run(tmp_path_factory, "ddp_docs_run", make)
    (run_dir,) = (root / "logs" / "train" / "runs").iterdir()
    return run_dir
