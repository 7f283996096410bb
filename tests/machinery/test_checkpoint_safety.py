"""Checkpoints survive a kill mid-write, a NaN loss never reaches one, and every reader
verifies one before using it (every entry of its zip against its CRC), plain data only."""

from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from my_project.machinery.errors import UserError
from my_project.machinery.preflight.checkpoint import check_checkpoint_path, read_checkpoint
from my_project.machinery.reliability import atomic_io
from my_project.machinery.reliability.atomic_io import AtomicCheckpointIO, atomic_torch_save
from my_project.machinery.run.record import to_floats, write_json

from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    FAST,
    clean_env,
    one_paragraph_error,
    run_entry,
    run_main_in_process,
)
from .lht_style import Scaling

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


def flip_weights(path: Path, count: int = 64) -> None:
    """Invert ``count`` bytes of the first tensor's data (``archive/data/0``) in place: the
    archive stays a valid zip that ``torch.load`` reads without a word."""
    with zipfile.ZipFile(path) as archive:
        entry = next(i for i in archive.infolist() if i.filename.endswith("/data/0"))
    with open(path, "r+b") as handle:
        handle.seek(entry.header_offset + 26)
        name, extra = struct.unpack("<HH", handle.read(4))
        handle.seek(entry.header_offset + 30 + name + extra)
        data = handle.read(count)
        handle.seek(-len(data), 1)
        handle.write(bytes(b ^ 0xFF for b in data))


def checkpoint_of(weights: torch.Tensor) -> dict:
    return {"state_dict": {"net.weight": weights}, "hyper_parameters": {"lr": 0.1}}


def test_a_flipped_byte_in_a_checkpoint_the_template_wrote_is_refused(tmp_path: Path) -> None:
    """Every entry of its zip carries its CRC-32, written with it: a changed byte anywhere in
    the weights is refused, pointing to the checkpoints beside it."""
    older, last = tmp_path / "epoch_000.ckpt", tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(checkpoint_of(torch.ones(100)), older)
    AtomicCheckpointIO().save_checkpoint(checkpoint_of(torch.zeros(100)), last)
    assert torch.equal(read_checkpoint(str(last))["state_dict"]["net.weight"], torch.zeros(100))
    flip_weights(last)
    assert not torch.equal(
        torch.load(last, weights_only=True)["state_dict"]["net.weight"], torch.zeros(100)
    )
    with pytest.raises(UserError) as refused:
        read_checkpoint(str(last))
    message = str(refused.value)
    assert f"ckpt_path={last} cannot be read as a checkpoint" in message
    assert "fails its CRC check" in message
    assert "an earlier one of its run" in message


def test_a_checkpoint_from_elsewhere_is_verified_by_its_zip_crcs(tmp_path: Path) -> None:
    path = tmp_path / "theirs.ckpt"
    torch.save(checkpoint_of(torch.ones(100)), path)
    assert read_checkpoint(str(path))["hyper_parameters"] == {"lr": 0.1}
    flip_weights(path, count=1)
    with pytest.raises(UserError, match=r"its entry \S+/data/0 fails its CRC check"):
        read_checkpoint(str(path))


def test_a_checkpoint_from_elsewhere_holding_a_pickled_class_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It is never unpickled (a class named in a pickle can run any code): one paragraph."""
    path = tmp_path / "theirs.ckpt"
    torch.save({**checkpoint_of(torch.ones(2)), "hyper_parameters": {"s": Scaling.NONE}}, path)
    args = [*DOCS_STYLE_EVAL, f"ckpt_path={path}"]
    code, err = run_main_in_process("eval", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert f"ckpt_path={path} holds a pickled tests.machinery.lht_style.Scaling" in message


def test_hyperparameters_are_saved_as_plain_data_weights_only_loading_reads(
    tmp_path: Path,
) -> None:
    """OmegaConf containers, Hydra's `_partial_` factories, tuples, enums, paths and classes:
    as lists, dicts and records, which `torch.load(weights_only=True)` reads."""
    optimizer = instantiate({"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.01})
    hyperparameters = {
        "split": OmegaConf.create([55, 5, 10]),
        "node": OmegaConf.create({"a": [1, 2]}),
        "optimizer": optimizer,
        "shape": (4, 4),
        "scaling": Scaling.STANDARD,
        "cache": Path("cache"),
        "kind": OmegaConf.create({}).__class__,
    }
    AtomicCheckpointIO().save_checkpoint(
        {"state_dict": {}, "hyper_parameters": hyperparameters, "hparams_type": dict},
        tmp_path / "a.ckpt",
    )
    saved = torch.load(tmp_path / "a.ckpt", weights_only=True)
    assert saved["hyper_parameters"] == {
        "split": [55, 5, 10],
        "node": {"a": [1, 2]},
        "optimizer": {"_object_": "torch.optim.adam.Adam", "_partial_": True, "lr": 0.01},
        "shape": (4, 4),
        "scaling": {"_object_": "tests.machinery.lht_style.Scaling", "_args_": ["standard"]},
        "cache": {"_object_": "pathlib.PosixPath", "_args_": ["cache"]},
        "kind": "omegaconf.dictconfig.DictConfig",
    }
    assert saved["hparams_type"] == "builtins.dict"


def test_a_checkpoint_path_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "last.ckpt"
    os.mkfifo(fifo)
    with pytest.raises(UserError) as refused:
        check_checkpoint_path(str(fifo))
    assert "is not a regular file" in str(refused.value)
    assert "does not exist" not in str(refused.value)


def test_metrics_json_is_valid_json_whatever_the_values(tmp_path: Path, capsys) -> None:
    path = write_json(
        {"test_acc": 0.5, "test_loss": float("nan"), "x": float("inf")}, tmp_path / "m.json"
    )
    assert json.loads(path.read_text()) == {"test_acc": 0.5, "test_loss": None, "x": None}
    assert "test_loss=nan, x=inf written as null" in capsys.readouterr().err
    assert to_floats(json.loads(path.read_text()))["test_acc"] == 0.5


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of one epoch of the docs-style module (in this process): its run directory."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        args = [*DOCS_STYLE, "trainer.max_epochs=1", "logger=csv", f"hydra.run.dir={run_dir}"]
        code, err = run_main_in_process("train", args, run_dir.parent / "logs", monkeypatch)
    assert code == 0, err[-3000:]
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


COMMANDS = {
    "eval": [*DOCS_STYLE_EVAL, "ckpt_path={ckpt}"],
    "predict": [*DOCS_STYLE_EVAL, "ckpt_path={ckpt}"],
    "serve": [*DOCS_STYLE_EVAL, "ckpt_path={ckpt}"],
    "export": [*DOCS_STYLE_EVAL, "ckpt_path={ckpt}"],
    "train": ["resume={run}"],
}


@pytest.mark.parametrize("script", COMMANDS)
def test_every_command_refuses_a_checkpoint_with_flipped_bytes_and_writes_nothing(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str
) -> None:
    """64 bytes inverted in the weights of last.ckpt (a zip `torch.load` still reads): eval,
    predict, serve, export and `resume=` each refuse it in one paragraph naming the file and
    the others of its run."""
    run = copy_of(trained, tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    flip_weights(last)
    before = snapshot(run)
    args = [arg.format(ckpt=last, run=run) for arg in COMMANDS[script]]
    code, err = run_main_in_process(script, args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert f"ckpt_path={last} cannot be read as a checkpoint" in message
    assert "an earlier one of its run" in message
    assert snapshot(run) == before
    assert not [p for p in (tmp_path / "logs").rglob("*") if p.is_file()]  # nor a run of its own


def poisoned(run_dir: Path) -> Path:
    """The run's last.ckpt with its first weight NaN, written as train.py writes checkpoints."""
    last = run_dir / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    next(iter(checkpoint["state_dict"].values())).view(-1)[0] = float("nan")
    atomic_torch_save(checkpoint, last)
    return last


def test_a_checkpoint_with_nan_weights_is_refused(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    last = poisoned(copy_of(trained, tmp_path))
    args = [*DOCS_STYLE_EVAL, f"ckpt_path={last}"]
    code, err = run_main_in_process("eval", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert "holds non-finite weights (NaN or inf in net.0.weight)" in message
    assert not (tmp_path / "logs").exists()


def test_resume_refuses_a_checkpoint_with_nan_weights(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = copy_of(trained, tmp_path)
    poisoned(run)
    code, err = run_main_in_process("train", [f"resume={run}"], tmp_path / "logs", monkeypatch)
    assert "holds non-finite weights" in one_paragraph_error(code, err)


@pytest.mark.slow  # two trainings, in this process
def test_a_disk_full_before_the_first_last_ckpt_names_the_best_one_and_resumes_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills at the first epoch's second save (last.ckpt, after the best
    epoch_000.ckpt): the paragraph names epoch_000.ckpt, complete, and `resume=` continues
    from it (it used to say the run stopped before its first checkpoint)."""
    real_save = atomic_io.torch.save
    saves: list[int] = []

    def fills_the_disk(obj: Any, handle: Any) -> None:
        saves.append(1)
        if len(saves) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_save(obj, handle)

    run_dir = tmp_path / "run"
    monkeypatch.setattr(atomic_io.torch, "save", fills_the_disk)
    args = [*DOCS_STYLE, "trainer.max_epochs=2", "logger=csv", f"hydra.run.dir={run_dir}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    best = run_dir / "checkpoints" / "epoch_000.ckpt"
    assert f"its newest complete checkpoint is {best}" in message, message
    assert "before its first checkpoint" not in message
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["epoch_000.ckpt"]
    monkeypatch.setattr(atomic_io.torch, "save", real_save)
    code, err = run_main_in_process("train", [f"resume={run_dir}"], tmp_path / "logs", monkeypatch)
    assert code == 0, err[-3000:]
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 1
