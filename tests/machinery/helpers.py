"""Shared test helpers: compose configs, run the entry points, read run outputs."""

from __future__ import annotations

import csv
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from my_project.machinery.config import config_dir

from . import processes

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = config_dir()

# Every run of a test is on the CPU, in one process, in float32, whatever the project's
# trainer defaults are (a generated project may default to gpu, dp, 16-mixed or devices=-1):
# `trainer=cpu` states each of those keys. A test about other settings overrides them
# (`trainer.devices=2 trainer.strategy=ddp`) or names another preset (`trainer=...`).
ON_CPU = ["trainer=cpu"]
# Small and fast: a few epochs, no wandb unless a test asks for it.
FAST = ["trainer.max_epochs=2", "logger=csv"]
# The machinery's tests run on a team's own module and data written as the Lightning docs
# write them (docs_style.py: LitClassifier, LitDataModule), configured as a team would
# (configs/experiment/docs_style.yaml here), never on the example: a team that deletes the
# example keeps them passing. Their metrics: train_loss, train_acc, val_acc, test_acc, ...
MACHINERY_CONFIGS = Path(__file__).resolve().parent / "configs"
SEARCH_MACHINERY_CONFIGS = f"hydra.searchpath=['file://{MACHINERY_CONFIGS}']"
DOCS_STYLE = [SEARCH_MACHINERY_CONFIGS, "experiment=docs_style"]  # train.py
# eval.py and predict.py (their configs have no `experiment` group, nor `monitor`)
DOCS_STYLE_EVAL = [SEARCH_MACHINERY_CONFIGS, "model=docs_style", "data=docs_style"]
# The environment variables of configs/paths/default.yaml, named after the package (so no
# line holds the package's name: a generated project's may be 80 characters long).
PACKAGE = config_dir.__module__.split(".")[0]
LOG_DIR_VAR, DATA_DIR_VAR = f"{PACKAGE.upper()}_LOG_DIR", f"{PACKAGE.upper()}_DATA_DIR"


def pinned(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """``overrides`` after `ON_CPU` (and after flags such as ``-m``), unless they pick a
    trainer preset themselves."""
    if any(o.lstrip("+~").startswith("trainer=") for o in overrides):
        return list(overrides)
    # After Hydra's flags (`-m`, `--cfg job`), before the first override: argparse takes the
    # overrides as one run of positional arguments.
    at = next(
        (i for i, o in enumerate(overrides) if "=" in o and not o.startswith("-")), len(overrides)
    )
    return [*overrides[:at], *ON_CPU, *overrides[at:]]


def compose_config(
    overrides: list[str], output_dir: Path, config_name: str = "train"
) -> DictConfig:
    """The config `python train.py <overrides>` would get (on the CPU, see `ON_CPU`), with
    the run dir set to output_dir."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=pinned(overrides))
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
    return cfg


# What `make test ARGS=...` passes its children (make exports command-line variables): a
# `make` a test runs would take them as its own.
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
MAKE_VARIABLES += ("ARGS", "VENV", "WORKERS", "TORCH", "TORCH_BUILD", "TORCH_INDEX", "PYTHON3")
MAKE_VARIABLES += ("FLOORS",)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess run: no wandb credentials, nothing of an outer
    `make`, quick and quiet."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WANDB_") and k not in MAKE_VARIABLES
    }
    env.update({"PYTHONUNBUFFERED": "1", "WANDB_SILENT": "true"})
    env.update(extra)
    return env


def run_entry(
    script: str,
    *overrides: str,
    cwd: Path | None = None,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python <script>.py <overrides>` from the repository root, as a user would (on the
    CPU, see `ON_CPU`), in a process of its own started warm (`processes.py`)."""
    return processes.run(
        [sys.executable, str(ROOT / f"{script}.py"), *pinned(overrides)],
        cwd=cwd or ROOT,
        env=env or clean_env(),
        timeout=timeout,
    )


def read_metrics(run_dir: Path) -> dict[str, float]:
    return json.loads((run_dir / "metrics.json").read_text())


# A run resumed mid-epoch averages the plain values it logs with `self.log(value,
# on_epoch=True)` over the batches after the resume only, in the epoch it resumes in: Lightning
# keeps their running sums in private state, not in checkpoints (README "Resume"). The modules
# of these tests log such values under these names; everything else (torchmetrics metrics,
# step values, weights) is bit-identical.
PLAIN_EPOCH_MEANS = re.compile(r"train_loss(_epoch)?|train/lr|lr")


def assert_same_after_resume(got: Any, want: Any, where: str = "") -> None:
    """``got`` equals ``want`` (metrics, a plotted history, CSV rows: dicts in lists), except
    for the values named in `PLAIN_EPOCH_MEANS`, which must only be there alike."""
    if isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for key, value in want.items():
            if not PLAIN_EPOCH_MEANS.fullmatch(str(key)):
                assert_same_after_resume(got[key], value, f"{where}/{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same_after_resume(a, b, f"{where}[{index}]")
    else:
        assert got == want, where


def csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def read_wandb_records(path: Path) -> list[Any]:
    """Records of a `.wandb` run file (wandb's LevelDB-style log of protobuf `Record`s).

    wandb no longer ships a Python reader for its own files, so this is the format in a
    dozen lines: a 7-byte header, then 32 KiB blocks of [crc32, length, type, payload].
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    block, pos, pending, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # too little room left for a header: padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending += payload
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def run_main_in_process(
    script: str, args: list[str], log_dir: Path, monkeypatch: Any
) -> tuple[int, str]:
    """`python <script>.py <args>` through the entry point's `main`, in this process (Hydra,
    the checks, the run directory, as from the command line, without a new Python with torch):
    its exit status and stderr. Runs write under ``log_dir``."""
    import contextlib
    import io

    from my_project.machinery.run import evaluate, export, predict, serve, train

    mains = {"train": train.main, "eval": evaluate.main, "predict": predict.main}
    mains |= {"serve": serve.main, "export": export.main}
    monkeypatch.setenv(LOG_DIR_VAR, str(log_dir))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *pinned(args)])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            mains[script]()
        except SystemExit as stop:
            return int(stop.code or 0), err.getvalue()
    return 0, err.getvalue()


def one_paragraph_error(code: int, err: str) -> str:
    """The `Error:` paragraph of a run refused as bad input (exit status 2, no traceback)."""
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    message = err.strip().split("\n\n")[-1]  # the last paragraph is the error
    assert message.startswith("Error: ") and "\n" not in message, err[-3000:]
    return message
