"""Kill and resume without loss: real training runs stopped by SIGKILL, SIGTERM and Ctrl-C.

A test-only callback (fault_injection.py) pauses the run right after a chosen training step,
in the middle of an epoch, so the signal always lands at the same point. Every run uses the
same seed with `trainer.deterministic=true`, so an interrupted and resumed run must end
bit-identical to one that never stopped: weights, metrics, the CSV log and the plotted history
(but for the epoch means of plain values logged in the epoch it resumed in).

The module is a team's own (docs_style.py), on two data paths: its plain DataLoader (which
the template makes resumable), and the template's in-memory base.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
import torch

from . import processes
from .helpers import (
    DOCS_STYLE,
    ON_CPU,
    ROOT,
    assert_same_after_resume,
    clean_env,
    csv_rows,
    read_metrics,
    run_entry,
)

# 2 epochs of 16 batches; last.ckpt every 5 steps and at each epoch end.
RUN = [
    *ON_CPU,
    *DOCS_STYLE,
    "trainer.max_epochs=2",
    "logger=csv",
    "trainer.deterministic=true",
    "seed=7",
    "callbacks.last_checkpoint.every_n_train_steps=5",
]
PAUSE_STEP = 27  # epoch 1, batch 11: two steps after the step-25 checkpoint
# The data module of each data path.
DATA = {"plain DataLoader": [], "in-memory DataLoader": ["data=toy_in_memory"]}
DATA_PATHS = list(DATA)


def start_paused_run(run_dir: Path, marker: Path, *extra: str) -> processes.Started:
    """Start training; return once it is paused after step PAUSE_STEP (mid-epoch)."""
    process = processes.start(
        [
            sys.executable,
            str(ROOT / "train.py"),
            *RUN,
            *extra,
            f"hydra.run.dir={run_dir}",
            "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
            f"+callbacks.pause.step={PAUSE_STEP}",
            f"+callbacks.pause.marker={marker}",
        ],
        cwd=ROOT,
        env=clean_env(),
        merge_stderr=True,
    )
    deadline = time.monotonic() + 300
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(
                f"the run never reached step {PAUSE_STEP}:\n{process.communicate()[0][-3000:]}"
            )
        time.sleep(0.1)
    return process


def stop(process: processes.Started, signum: int) -> tuple[int, str]:
    process.send_signal(signum)
    output, _ = process.communicate(timeout=300)
    return process.returncode, output


def checkpoint(run_dir: Path, name: str = "last.ckpt") -> dict:
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)


def assert_same_run(resumed: Path, reference: Path) -> None:
    """Bit-identical, but for the epoch means of plain values logged in the epoch the run
    resumed in (`assert_same_after_resume`)."""
    assert_same_after_resume(read_metrics(resumed), read_metrics(reference))
    got, want = checkpoint(resumed), checkpoint(reference)
    assert got["global_step"] == want["global_step"] == 32 and got["epoch"] == want["epoch"] == 1
    assert got["state_dict"].keys() == want["state_dict"].keys()
    for key, value in want["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key

    def history(ckpt: dict) -> list:
        return next(v["history"] for k, v in ckpt["callbacks"].items() if "PlotCallback" in k)

    assert_same_after_resume(history(got), history(want))
    assert len(history(want)) == 2
    assert_same_after_resume(csv_rows(resumed), csv_rows(reference))


class References:
    """The uninterrupted run every interrupted one is compared with, one per data module."""

    def __init__(self, root: Path) -> None:
        self.root, self.runs = root, {}

    def __call__(self, data: list[str]) -> Path:
        key = data[0] if data else "plain"
        if key not in self.runs:
            run_dir = self.root / key.replace("=", "_")
            result = run_entry("train", *RUN, *data, f"hydra.run.dir={run_dir}")
            assert result.returncode == 0, result.stderr[-3000:]
            self.runs[key] = run_dir
        return self.runs[key]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> References:
    return References(tmp_path_factory.mktemp("reference"))


@pytest.mark.slow
def test_two_seeded_deterministic_runs_are_bit_identical(
    reference_run: References, tmp_path: Path
) -> None:
    result = run_entry("train", *RUN, f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, reference_run([]))


@pytest.mark.slow
@pytest.mark.parametrize("data_path", DATA_PATHS)
def test_kill_9_mid_epoch_then_resume_matches_an_uninterrupted_run(
    reference_run: References, tmp_path: Path, data_path: str
) -> None:
    """On every data path: the team's plain DataLoader (made resumable by the template) and the
    in-memory base (its position in the epoch is saved and restored the same way)."""
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    code, _ = stop(start_paused_run(run_dir, marker, *DATA[data_path]), signal.SIGKILL)
    assert code == -signal.SIGKILL
    # The newest complete checkpoint is the step-25 one, in the middle of epoch 1.
    saved = checkpoint(run_dir)
    assert (saved["epoch"], saved["global_step"]) == (1, 25)
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] == 9
    assert not list((run_dir / "checkpoints").glob(".partial-*"))

    result = run_entry("train", f"resume={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(run_dir, reference_run(DATA[data_path]))
    # Hydra's record of the original command is kept; the resumed one is recorded beside it.
    assert "ckpt_path" not in (run_dir / ".hydra" / "overrides.yaml").read_text()
    (resumed_record,) = (run_dir / ".hydra").glob("resume_*/overrides.yaml")
    assert "ckpt_path=last" in resumed_record.read_text()


@pytest.mark.slow
def test_sigterm_mid_epoch_saves_a_checkpoint_that_resumes_exactly(
    reference_run: References, tmp_path: Path
) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    code, output = stop(start_paused_run(run_dir, marker), signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "Stopped by SIGTERM" in output and f"python train.py resume={run_dir}" in output
    saved = checkpoint(run_dir)
    assert (saved["epoch"], saved["global_step"]) == (1, PAUSE_STEP)
    assert not (run_dir / "metrics.json").exists()

    result = run_entry("train", f"resume={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(run_dir, reference_run([]))


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_exits_130(tmp_path: Path) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    code, output = stop(start_paused_run(run_dir, marker), signal.SIGINT)
    assert code == 128 + signal.SIGINT, output[-3000:]
    assert "Ctrl-C: stopping after the current batch" in output
    assert "Stopped by Ctrl-C" in output and "resume=" in output
    assert checkpoint(run_dir)["global_step"] == PAUSE_STEP


def test_a_mid_epoch_checkpoint_on_other_devices_or_batch_size_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved after step 5 of a 16-batch epoch by one process, resumed on two (or with another
    batch size): the position in the epoch counts one process's batches (of the old size), so
    the rest of the epoch would be skipped. Refused in one paragraph that says how to continue;
    the same devices resume it."""
    from .helpers import one_paragraph_error, run_main_in_process

    run = tmp_path / "run"
    args = [*RUN, "trainer.max_epochs=1", "+trainer.max_steps=5", f"hydra.run.dir={run}"]
    code, err = run_main_in_process("train", [*args, "test=false"], tmp_path / "a", monkeypatch)
    assert code == 0, err[-3000:]
    checkpoint = run / "checkpoints" / "last.ckpt"
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["global_step"] == 5
    (loader,) = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    batch_size = loader["batch_size"]
    again = [*RUN, f"ckpt_path={checkpoint}", "test=false", f"hydra.run.dir={tmp_path / 'b'}"]
    code, err = run_main_in_process(
        "train", [*again, "trainer.devices=2"], tmp_path / "logs", monkeypatch
    )
    message = one_paragraph_error(code, err)
    assert message.startswith(
        f"Error: {checkpoint} was saved in the middle of epoch 0 (after 5 batches of each of 1 "
        "process), and this run starts 2 processes"
    ), message
    assert "Resume with the devices it had (`trainer.devices=1` on one machine)" in message
    assert not (tmp_path / "b").exists() and not (tmp_path / "logs").exists()
    # another batch size: the position counts batches of the old size
    code, err = run_main_in_process(
        "train", [*again, f"data.batch_size={batch_size + 3}"], tmp_path / "logs", monkeypatch
    )
    message = one_paragraph_error(code, err)
    assert message.startswith(
        f"Error: {checkpoint} was saved in the middle of epoch 0 (after 5 batches of "
        f"{batch_size} examples), and this run's training batches hold {batch_size + 3}"
    ), message
    assert f"Resume with the batch size it had (`data.batch_size={batch_size}`" in message
    assert not (tmp_path / "b").exists() and not (tmp_path / "logs").exists()
    # nothing left to train, of another model: refused, without the note of what would run
    code, err = run_main_in_process(
        "train", [*again, "+trainer.max_steps=5", "model.hidden=8"], tmp_path / "logs", monkeypatch
    )
    assert "is a checkpoint of a different model" in one_paragraph_error(code, err)
    assert "Note:" not in err, err[-3000:]
    code, err = run_main_in_process("train", again, tmp_path / "logs", monkeypatch)
    assert code == 0, err[-3000:]
