"""kill -9 and resume of the Lightning docs' OneCycleLR recipe (onecycle.py: the schedule sized
by ``self.trainer.estimated_stepping_batches``, AdamW's betas cycled with it) end bit-identical to
the run that never stopped, in 1 and 2 processes: weights, optimizer state, metrics and CSV log
(but for the train loss's mean of the epoch it resumed in: `assert_same_after_resume`);
and the resume says nothing changed (the betas were once "restored" to their start)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from . import processes
from .helpers import (
    ROOT,
    SEARCH_MACHINERY_CONFIGS,
    assert_same_after_resume,
    clean_env,
    csv_rows,
    pinned,
    read_metrics,
    run_entry,
)

RUN = [
    SEARCH_MACHINERY_CONFIGS,
    "experiment=onecycle",
    "trainer.max_epochs=2",
    "logger=csv",
    "seed=7",
    "trainer.deterministic=true",
]
TIMEOUT = 420


def checkpoint(run_dir: Path) -> dict[str, Any]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)


def assert_equal(got: Any, want: Any, where: str = "") -> None:
    """Bit-equal, tensors and all, anywhere in nested dicts and lists."""
    if isinstance(want, torch.Tensor):
        assert torch.equal(got, want), where
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            assert_equal(got[key], want[key], f"{where}/{key}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_equal(a, b, f"{where}[{index}]")
    else:
        assert got == want, where


@pytest.mark.slow
@pytest.mark.parametrize(("devices", "every", "pause"), [(1, 5, 7), (2, 3, 7)])
def test_kill_9_mid_epoch_and_resume_of_a_onecycle_module_ends_bit_identical(
    tmp_path: Path, devices: int, every: int, pause: int
) -> None:
    """64 samples in batches of 8: 8 steps an epoch in one process, 4 in each of two. The run
    is killed after step ``pause`` and resumes from its step-``every``-multiple checkpoint,
    in the middle of an epoch."""
    run = [*RUN, f"callbacks.last_checkpoint.every_n_train_steps={every}"]
    if devices > 1:
        run += [f"trainer.devices={devices}", "trainer.strategy=ddp"]
    reference, run_dir, marker = tmp_path / "reference", tmp_path / "run", tmp_path / "paused"
    result = run_entry("train", *run, f"hydra.run.dir={reference}", timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]

    pause_here = [
        "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
        f"+callbacks.pause.step={pause}",
        f"+callbacks.pause.marker={marker}",
    ]
    command = [sys.executable, str(ROOT / "train.py"), *pinned([*run, *pause_here])]
    process = processes.start(
        [*command, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        env=clean_env(),
        new_session=True,  # kill -9 reaches every process of the run
        merge_stderr=True,
    )
    deadline = time.monotonic() + TIMEOUT
    try:
        while not marker.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    saved = checkpoint(run_dir)
    assert saved["global_step"] == pause // every * every
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] > 0

    resumed = run_entry("train", f"resume={run_dir}", timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed at step" not in resumed.stdout + resumed.stderr  # nothing changed
    assert_same_after_resume(read_metrics(run_dir), read_metrics(reference))
    got, want = checkpoint(run_dir), checkpoint(reference)
    for part in ("global_step", "state_dict", "optimizer_states", "lr_schedulers"):
        assert_equal(got[part], want[part], part)
    assert_same_after_resume(csv_rows(run_dir), csv_rows(reference))
