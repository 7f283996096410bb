"""The device report (`python -m my_project.machinery.doctor`): the versions, the devices torch
sees, and one matrix product timed on the CPU and on each GPU, as a person checks a new
machine; it takes no arguments and loads torch only once it runs."""

from __future__ import annotations

import re
import subprocess
import sys

import torch

from my_project.machinery import doctor

from . import processes
from .helpers import ROOT, clean_env

DOCTOR = [sys.executable, "-m", doctor.__name__]


def test_the_report_names_the_versions_and_devices_and_times_each_device() -> None:
    result = processes.run(DOCTOR, cwd=ROOT, env=clean_env(), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = dict(
        re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in result.stdout.splitlines()[:6]
    )
    assert rows["torch, Lightning"].startswith(torch.__version__)
    assert rows["torch.cuda.is_available()"] == str(torch.cuda.is_available())
    timed = result.stdout.split(f"One {doctor.SIZE}x{doctor.SIZE} float32 matrix product:\n")[1]
    devices = [line.split()[0] for line in timed.splitlines()]
    assert devices == doctor.devices() and devices[0] == "cpu"
    assert all("GFLOP/s" in line for line in timed.splitlines())
    if torch.cuda.is_available():
        assert "x the CPU)" in timed.splitlines()[1]


def test_arguments_are_refused_in_one_paragraph() -> None:
    result = processes.run([*DOCTOR, "trainer.devices=2"], cwd=ROOT, env=clean_env(), timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unrecognized arguments: trainer.devices=2" in result.stderr


def test_importing_the_doctor_loads_neither_torch_nor_lightning() -> None:
    code = (
        "import sys, my_project.machinery.doctor\n"
        "print(sorted(m for m in ('torch', 'lightning', 'hydra', 'rich') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_product_is_timed_on_the_device_it_runs_on() -> None:
    assert 0 < doctor.seconds_per_product("cpu", size=64, repeats=2) < 10
