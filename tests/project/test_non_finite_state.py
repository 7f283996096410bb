"""The example's AdamW, at a learning rate so high that its state overflows before the loss does: no checkpoint
holds that state, and a resume with a lower learning rate goes on from the one kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ..machinery.helpers import run_entry
from .example import TRAIN_CLASSIFIER


def all_finite(data: object) -> bool:
    if isinstance(data, torch.Tensor):
        return not data.is_floating_point() or bool(torch.isfinite(data).all())
    if isinstance(data, dict):
        return all(all_finite(value) for value in data.values())
    if isinstance(data, (list, tuple)):
        return all(all_finite(value) for value in data)
    return True


@pytest.mark.slow
def test_a_non_finite_stop_keeps_a_finite_checkpoint_that_a_resume_goes_on_from(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        *TRAIN_CLASSIFIER,
        "logger=csv",
        "model.lr=3e4",
        "callbacks.last_checkpoint.every_n_train_steps=5",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 3, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "held NaN or inf" in result.stderr or "the training loss was" in result.stderr
    last = run_dir / "checkpoints" / "last.ckpt"
    assert f"{last}" in result.stderr and "finite" in result.stderr
    saved = torch.load(last, weights_only=True)
    net = {k: v for k, v in saved["state_dict"].items() if k.startswith("net.")}
    assert all_finite(net) and all_finite(saved["optimizer_states"])

    resumed = run_entry(
        "train",
        f"resume={run_dir}",
        "model.lr=0.001",
        "++trainer.gradient_clip_val=1.0",
        "trainer.max_epochs=2",
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed at step" in resumed.stdout + resumed.stderr
    assert torch.load(last, weights_only=True)["global_step"] > saved["global_step"]
