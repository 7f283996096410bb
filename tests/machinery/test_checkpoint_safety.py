"""Checkpoints survive a kill mid-write, and a NaN loss never reaches one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from my_project.machinery.reliability.atomic_io import AtomicCheckpointIO, atomic_torch_save

from .helpers import DOCS_STYLE, FAST, clean_env, run_entry

# Writes step 1, then starts writing step 2 and is SIGKILLed with half of its bytes on disk.
KILLED_MID_WRITE = """
import io, os, signal, sys, torch
from my_project.machinery.reliability.atomic_io import atomic_torch_save
target = sys.argv[1]
atomic_torch_save({"step": 1, "weights": torch.ones(1000)}, target)
real_save = torch.save
def save_half_then_die(obj, handle):
    buffer = io.BytesIO()
    real_save(obj, buffer)
    handle.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)
torch.save = save_half_then_die
atomic_torch_save({"step": 2, "weights": torch.zeros(100_000)}, target)
"""


@pytest.mark.slow
def test_kill_9_mid_write_leaves_the_previous_complete_checkpoint(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    result = subprocess.run(
        [sys.executable, "-c", KILLED_MID_WRITE, str(target)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -9, result.stderr[-2000:]
    (partial,) = tmp_path.glob(".partial-*")  # the cut-off write, beside the target
    assert partial.stat().st_size > 0
    loaded = torch.load(target, weights_only=True)
    assert loaded["step"] == 1 and torch.equal(loaded["weights"], torch.ones(1000))
    # The next save cleans up after the dead writer.
    atomic_torch_save({"step": 3}, target)
    assert torch.load(target, weights_only=True)["step"] == 3
    assert not list(tmp_path.glob(".partial-*"))


def test_checkpoint_io_masks_secret_values_in_hyperparameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")
    checkpoint = {
        "hyper_parameters": {"lr": 0.1, "note": "uses tok-0123456789abcdef"},
        "state_dict": {"w": torch.ones(2)},
    }
    AtomicCheckpointIO().save_checkpoint(checkpoint, tmp_path / "a.ckpt")
    assert b"tok-0123456789abcdef" not in (tmp_path / "a.ckpt").read_bytes()
    loaded = torch.load(tmp_path / "a.ckpt", weights_only=True)
    assert loaded["hyper_parameters"] == {"lr": 0.1, "note": "***"}


@pytest.mark.slow
def test_nan_loss_stops_at_its_step_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    result = run_entry(
        "train",
        *DOCS_STYLE,
        *FAST,
        "callbacks.last_checkpoint.every_n_train_steps=5",
        "+callbacks.poison._target_=tests.machinery.fault_injection.PoisonWeightsAtStep",
        "+callbacks.poison.step=7",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 3, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "the training loss was nan at step 8 (epoch 0)" in result.stderr
    assert "Likely causes" in result.stderr and "model.lr" in result.stderr
    assert str(tmp_path / "checkpoints" / "last.ckpt") in result.stderr
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 5
    assert all(
        torch.isfinite(w).all() for k, w in last["state_dict"].items() if k.startswith("net")
    )
    assert not (tmp_path / "metrics.json").exists()
