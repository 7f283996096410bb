"""The device report (`python -m my_project.machinery.doctor`): what it says train.py will use is what
a following `python train.py` with the same overrides records in its `run_info.json`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from my_project.machinery.devices.choice import DeviceChoice
from my_project.machinery.doctor import explain, plan_devices
from my_project.machinery.errors import UserError

from . import processes
from .helpers import DOCS_STYLE, LOG_DIR_VAR, ROOT, clean_env, compose_config, pinned, run_entry

DOCTOR = [sys.executable, "-m", explain.__module__]
# Tiny runs; on a machine with GPUs, `trainer.devices=2` stays a 2-process CPU run.
TINY = ["trainer.max_epochs=1", "logger=csv"]
ON_CPU = ["trainer.accelerator=cpu"] if torch.cuda.is_available() else []
SETTINGS = ("accelerator", "devices", "strategy", "num_nodes", "precision", "processes")


def quiet_env(log_dir: Path) -> dict[str, str]:
    """Runs log under log_dir; the console is wide enough that no row or sentence wraps."""
    return clean_env(COLUMNS="250", **{LOG_DIR_VAR: str(log_dir)})


def run_doctor(*overrides: str, log_dir: Path) -> subprocess.CompletedProcess[str]:
    return processes.run([*DOCTOR, *overrides], cwd=ROOT, env=quiet_env(log_dir), timeout=300)


def plan_rows(stdout: str) -> dict[str, str]:
    """The "train.py would use" column of the report's plan table, by setting."""
    rows = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in SETTINGS and len(cells) >= 2:
            rows[cells[0]] = cells[-1]
    assert set(rows) == set(SETTINGS), stdout
    return rows


def report_then_train(overrides: list[str], tmp_path: Path) -> tuple[dict[str, str], str, dict]:
    """Run the doctor, then train.py with the same overrides; the plan, the why, the record."""
    run_dir = tmp_path / "run"
    args = pinned([*DOCS_STYLE, *overrides, *TINY, f"hydra.run.dir={run_dir}"])  # the same for both
    report = run_doctor(*args, log_dir=tmp_path / "logs")
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-3000:]
    assert not run_dir.exists() and not (tmp_path / "logs").exists(), "the doctor wrote files"
    why = next(line for line in report.stdout.splitlines() if line.startswith("Why: "))

    result = run_entry("train", *args, env=quiet_env(tmp_path / "logs"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    record = json.loads((run_dir / "run_info.json").read_text())
    return plan_rows(report.stdout), why, record


def assert_plan_matches_record(plan: dict[str, str], record: dict) -> None:
    assert plan["accelerator"] == record["accelerator"]
    assert plan["devices"].split()[0] == str(record["devices"])
    assert plan["strategy"].split()[0] == record["strategy"]
    assert plan["num_nodes"] == str(record["num_nodes"])
    assert plan["precision"] == record["precision"]
    group = record["process_group"]  # what torch.distributed really had, or None
    assert int(plan["processes"]) == (group["world_size"] if group else 1)
    if group:
        assert f"({group['backend']}," in plan["strategy"]


@pytest.mark.slow
def test_report_of_the_default_config_is_what_train_records(tmp_path: Path) -> None:
    plan, why, record = report_then_train(["trainer=cpu", "trainer.accelerator=auto"], tmp_path)
    assert_plan_matches_record(plan, record)
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert plan["accelerator"] == "cpu" and plan["strategy"] == "SingleDeviceStrategy"
        assert why == (
            "Why: No GPU: accelerator=auto picked cpu because no CUDA/MPS device is visible; "
            "`trainer.devices=1` runs one process on cpu."
        )
        assert record["process_group"] is None


@pytest.mark.slow
def test_report_of_two_cpu_devices_is_the_two_process_ddp_run_train_records(
    ddp_docs_run: Path, tmp_path: Path
) -> None:
    """The doctor's plan for `trainer.devices=2`, against the session's 2-process run."""
    report = run_doctor(*pinned([*DOCS_STYLE, *ON_CPU, "trainer.devices=2"]), log_dir=tmp_path)
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-3000:]
    plan = plan_rows(report.stdout)
    why = next(line for line in report.stdout.splitlines() if line.startswith("Why: "))
    record = json.loads((ddp_docs_run / "run_info.json").read_text())
    assert_plan_matches_record(plan, record)
    assert (plan["accelerator"], plan["processes"]) == ("cpu", "2")
    assert plan["strategy"] == "HydraDDPStrategy (gloo, start_method=popen)"
    assert record["process_group"] == {"backend": "gloo", "world_size": 2}
    assert why.endswith("`trainer.devices=2` runs 2 CPU processes with DDP over gloo.")


def test_bad_overrides_exit_2_with_train_py_s_message_before_any_heavy_import(
    tmp_path: Path,
) -> None:
    result = run_doctor("trainer.max_epochs=abc", log_dir=tmp_path)
    assert result.returncode == 2
    assert "`trainer.max_epochs='abc'` must be an integer" in result.stderr
    assert "Traceback" not in result.stderr and "Software" not in result.stdout

    result = run_doctor("logger=spreadsheet", log_dir=tmp_path)  # the template's groups only
    assert result.returncode == 2
    assert "Available options in 'logger'" in result.stderr and "csv" in result.stderr
    assert "Traceback" not in result.stderr

    result = run_doctor("--json", log_dir=tmp_path)
    assert result.returncode == 2 and "trainer.devices=2" in result.stderr


def test_importing_the_doctor_loads_neither_torch_nor_lightning() -> None:
    code = (
        "import sys, my_project.machinery.doctor\n"
        "print(sorted(m for m in ('torch', 'lightning', 'hydra', 'rich') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["trainer.devices=2"], ("cpu", 2, "HydraDDPStrategy", "popen", "gloo", 2)),
        (
            ["trainer=ddp_cpu", "trainer.num_nodes=2"],
            ("cpu", 2, "HydraDDPStrategy", "popen", "gloo", 4),
        ),
        (
            ["trainer.devices=2", "trainer.strategy=ddp_spawn"],
            ("cpu", 2, "HydraDDPStrategy", "spawn", "gloo", 2),
        ),
        (
            ["trainer.devices=2", "trainer.strategy=dp"],
            ("cpu", 2, "DataParallelStrategy", None, None, 1),
        ),
    ],
)
def test_plan_devices_is_lightnings_choice_for_the_config(
    overrides: list[str], expected: tuple, tmp_path: Path
) -> None:
    choice = plan_devices(compose_config([*ON_CPU, *overrides], tmp_path).trainer)
    got = (
        choice.accelerator,
        choice.devices,
        choice.strategy,
        choice.start_method,
        choice.backend,
        choice.world_size,
    )
    assert got == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without GPUs")
def test_plan_devices_gives_train_py_s_error_for_a_gpu_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"has none.*`trainer=cpu`"):
        plan_devices(compose_config(["trainer=gpu"], tmp_path).trainer)


def choice(
    accelerator: str, devices: int, strategy: str, world_size: int, **kw: object
) -> DeviceChoice:
    values: dict = {
        "accelerator": accelerator,
        "devices": devices,
        "device_ids": list(range(devices)),
        "strategy": strategy,
        "start_method": None,
        "backend": None,
        "num_nodes": 1,
        "world_size": world_size,
        "precision": "32-true",
    }
    return DeviceChoice(**{**values, **kw})


DDP_GPU = {"start_method": "popen", "backend": "nccl"}


@pytest.mark.parametrize(
    ("asked", "used", "gpus", "sentence"),
    [
        (
            {"accelerator": "auto", "devices": 2},
            choice("cuda", 2, "HydraDDPStrategy", 2, **DDP_GPU),
            2,
            "2 GPUs found: accelerator=auto picked cuda; `trainer.devices=2` will run DDP with "
            "2 processes over nccl.",
        ),
        (
            {"accelerator": "auto", "devices": 2},
            choice("cpu", 2, "HydraDDPStrategy", 2, start_method="popen", backend="gloo"),
            0,
            "No GPU: accelerator=auto picked cpu because no CUDA/MPS device is visible; "
            "`trainer.devices=2` runs 2 CPU processes with DDP over gloo.",
        ),
        (
            {"accelerator": "gpu", "devices": -1, "strategy": "dp"},
            choice("cuda", 4, "DataParallelStrategy", 1),
            4,
            "4 GPUs found: accelerator=gpu means cuda here; strategy=dp runs one process that "
            "splits each batch across 4 CUDA devices.",
        ),
        (
            {"accelerator": "gpu", "devices": 4, "num_nodes": 2},
            choice("cuda", 4, "HydraDDPStrategy", 8, num_nodes=2, **DDP_GPU),
            4,
            "4 GPUs found: accelerator=gpu means cuda here; `trainer.devices=4` will run DDP with "
            "4 processes on each of 2 nodes (8 in all) over nccl.",
        ),
        (
            {"accelerator": "cpu", "devices": 1},
            choice("cpu", 1, "SingleDeviceStrategy", 1),
            1,
            "`trainer.accelerator=cpu` was asked for (1 GPU found, not used); "
            "`trainer.devices=1` runs one process on cpu.",
        ),
        (
            {"accelerator": "auto", "devices": [1]},
            choice("cuda", 1, "SingleDeviceStrategy", 1, device_ids=[1]),
            2,
            "2 GPUs found: accelerator=auto picked cuda; `trainer.devices=[1]` runs one process "
            "on cuda:1.",
        ),
    ],
)
def test_the_why_sentence_names_the_devices_found_and_what_runs(
    asked: dict, used: DeviceChoice, gpus: int, sentence: str
) -> None:
    assert explain(asked, used, gpus=gpus, mps=False) == sentence
