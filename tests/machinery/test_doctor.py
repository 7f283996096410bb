"""The device report (`python -m my_project.machinery.doctor [OVERRIDES]`): the versions, the
devices torch sees, what `python train.py OVERRIDES` would run on here and why (a line each
for the accelerator, devices, strategy and precision: what that run records in its
`run_info.json`), and one matrix product timed on the CPU and on each GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from my_project.machinery import doctor

from . import processes
from .helpers import DOCS_STYLE, ROOT, clean_env, pinned

DOCTOR = [sys.executable, "-m", doctor.__name__]
SETTINGS = ["accelerator", "devices", "strategy", "precision"]
# On a machine with GPUs, `trainer.devices=2` of the session's DDP run stays on the CPU there.
ON_CPU = ["trainer.accelerator=cpu"] if torch.cuda.is_available() else []


def run_doctor(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return processes.run([*DOCTOR, *args], cwd=ROOT, env=clean_env(), timeout=timeout)


def planned(stdout: str, command: str) -> dict[str, tuple[str, str]]:
    """(what, why) by setting, from the report's block on what `command` would run on."""
    block = stdout.split(f"What `{command}` would run on here:\n")[1].split("\n\n")[0]
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=2) for line in block.splitlines()]
    return {setting: (what, why) for setting, what, why in rows}


def test_the_report_names_the_versions_devices_the_run_and_times_each_device() -> None:
    """With `trainer=cpu`, a project's own trainer defaults aside (a generated one's may be DDP)."""
    result = run_doctor("trainer=cpu")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = dict(
        re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in result.stdout.splitlines()[:6]
    )
    assert rows["torch, Lightning"].startswith(torch.__version__)
    assert rows["torch.cuda.is_available()"] == str(torch.cuda.is_available())
    plan = planned(result.stdout, "python train.py trainer=cpu")
    assert list(plan) == SETTINGS  # one line each, with the reason
    assert plan["accelerator"][0] == "cpu"
    assert plan["accelerator"][1].startswith("trainer.accelerator=cpu, asked for; torch sees ")
    assert plan["devices"] == ("1", "trainer.devices=1: 1 CPU process")
    assert plan["strategy"] == (
        "SingleDeviceStrategy",
        "trainer.strategy=auto: Lightning's pick for 1 device, one process on one device",
    )
    assert plan["precision"] == (
        "32-true",
        "trainer.precision=32-true: float32 weights and computation",
    )
    timed = result.stdout.split(f"One {doctor.SIZE}x{doctor.SIZE} float32 matrix product:\n")[1]
    devices = [line.split()[0] for line in timed.splitlines()]
    assert devices == doctor.devices() and devices[0] == "cpu"
    assert all("GFLOP/s" in line for line in timed.splitlines())
    if torch.cuda.is_available():
        assert "x the CPU)" in timed.splitlines()[1]


@pytest.mark.slow
def test_what_it_says_two_devices_run_on_is_what_that_run_records(ddp_docs_run: Path) -> None:
    """Against the session's `python train.py trainer.devices=2` of the docs-style module."""
    overrides = pinned([*DOCS_STYLE, *ON_CPU, "trainer.devices=2"])
    result = run_doctor(*overrides)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    plan = planned(result.stdout, " ".join(["python train.py", *overrides]))
    record = json.loads((ddp_docs_run / "run_info.json").read_text())
    assert {s: plan[s][0] for s in SETTINGS} == {s: str(record[s]) for s in SETTINGS}
    assert plan["strategy"][1].endswith(
        "DDP: 2 processes (the command run again for each), over gloo"
    )
    assert plan["devices"][1] == "trainer.devices=2: 2 CPU processes"


def test_a_bad_override_is_refused_in_one_paragraph_before_the_report() -> None:
    result = run_doctor("trainer.max_epochs=abc", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "`trainer.max_epochs='abc'` must be an integer" in result.stderr
    assert "torch, Lightning" not in result.stdout
    result = run_doctor("logger=spreadsheet", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "python train.py --help" in result.stderr
    result = run_doctor("--json", timeout=120)
    assert result.returncode == 2 and "unrecognized arguments: --json" in result.stderr


def test_importing_the_doctor_loads_neither_torch_nor_lightning() -> None:
    code = (
        "import sys, my_project.machinery.doctor\n"
        "print(sorted(m for m in ('torch', 'lightning', 'hydra', 'rich') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_product_is_timed_on_the_device_it_runs_on() -> None:
    assert 0 < doctor.seconds_per_product("cpu", size=64, repeats=2) < 10
