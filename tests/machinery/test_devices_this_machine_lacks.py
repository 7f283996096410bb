"""Trainer settings that need what this machine lacks (a GPU, Apple silicon): one line naming
what runs here, exit status 2, before the run starts. A project generated with
`accelerator=gpu`, `mps` or `devices=-1` gets these on a machine without that hardware."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch.accelerators import MPSAccelerator

from my_project.machinery.errors import UserError
from my_project.machinery.preflight.devices import check_devices

from .helpers import run_entry

HAS_CUDA = torch.cuda.is_available()
HAS_MPS = MPSAccelerator.is_available()


@pytest.mark.skipif(HAS_MPS, reason="checks a machine without Apple silicon (MPS)")
def test_mps_on_a_machine_without_it_names_trainer_cpu() -> None:
    with pytest.raises(UserError, match=r"has none: run on the CPU with `trainer=cpu`"):
        check_devices({"accelerator": "mps", "devices": 1})


@pytest.mark.skipif(HAS_CUDA or HAS_MPS, reason="checks a machine without GPUs")
def test_every_gpu_on_a_machine_without_one_names_trainer_cpu() -> None:
    with pytest.raises(UserError, match=r"every GPU, but this machine has none.*`trainer=cpu`"):
        check_devices({"accelerator": "auto", "devices": -1})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            ["trainer=gpu"],
            "`trainer=cpu`",
            marks=pytest.mark.skipif(HAS_CUDA or HAS_MPS, reason="needs a machine without GPUs"),
            id="gpu",
        ),
        pytest.param(
            ["trainer=mps"],
            "`trainer=cpu`",
            marks=pytest.mark.skipif(HAS_MPS, reason="needs a machine without Apple silicon"),
            id="mps",
        ),
    ],
)
def test_train_stops_in_one_line_before_the_run(
    tmp_path: Path, overrides: list[str], expected: str
) -> None:
    result = run_entry("train", *overrides, f"hydra.run.dir={tmp_path}", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("Error: trainer.") and expected in line
    assert {p.name for p in tmp_path.iterdir()} <= {".hydra", "train.log"}  # Hydra's own only


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        (4, "trainer.devices=4 asks for 4 GPUs, but this machine has 2: use `trainer.devices=2`"),
        ("3", "trainer.devices=3 asks for 3 GPUs, but this machine has 2"),
        ([0, 3], "trainer.devices=[0, 3] asks for GPU 3 (GPUs are counted from 0)"),
        ("0,2", "trainer.devices=0,2 asks for GPU 2"),
    ],
)
def test_more_gpus_than_the_machine_has_says_what_to_type(
    devices: object, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine with two GPUs (as torch reports them), whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for accelerator in ("gpu", "cuda", "auto"):
        with pytest.raises(UserError) as refused:
            check_devices({"accelerator": accelerator, "devices": devices})
        assert str(refused.value).startswith(expected)
        assert "(or `trainer.devices=-1` for all of them)" in str(refused.value)
    check_devices({"accelerator": "gpu", "devices": 2})
    check_devices({"accelerator": "gpu", "devices": [1]})
    check_devices({"accelerator": "cpu", "devices": 4})  # CPU processes: as many as asked
