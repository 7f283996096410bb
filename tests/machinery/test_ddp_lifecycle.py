"""A 2-process run (`trainer.devices=2`, real DDP processes on the CPU over gloo) resumes
exactly, and SIGTERM / Ctrl-C stop it cleanly wherever they land; torchrun's restart of a
failed worker group continues it exactly; a rank that refuses alone leaves no process waiting.

Every run is seeded and deterministic: a run that was stopped and resumed must end
bit-identical to the reference run that never stopped, in weights, test metrics and train
metrics. `PauseAtStep` (fault_injection.py) holds the run at a known point until the signal
arrives. Signals go to the main process (`kill <pid>`, what schedulers send) or to the whole
process group (Ctrl-C in a terminal).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from . import processes
from .helpers import (
    DOCS_STYLE,
    LOG_DIR_VAR,
    ROOT,
    assert_same_after_resume,
    clean_env,
    csv_rows,
    pinned,
    read_metrics,
    run_entry,
)

# A team's own module and data (docs_style.py): 512 training samples, 256 per process,
# batches of 16: 16 steps per epoch.
BASE = [
    *DOCS_STYLE,
    "trainer.devices=2",
    "data.batch_size=16",
    "trainer.max_epochs=2",
    "logger=csv",
    "trainer.deterministic=true",
    "seed=7",
    # Agree on a stop after every batch: each stop below lands on the step it names (every N
    # steps, as by default: test_a_stop_under_ddp_comes_at_the_next_agreement).
    "callbacks.stop_together.check_every_n_steps=1",
]
STEPS = 16
TIMEOUT = 420


def run_train(*overrides: str, env: dict[str, str] | None = None) -> str:
    result = run_entry("train", *overrides, env=env, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2-process run every stopped or resumed one is compared with."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    run_train(*BASE, f"hydra.run.dir={run_dir}")
    assert checkpoint(run_dir)["global_step"] == 2 * STEPS
    return run_dir


def checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)


def assert_same_as(run_dir: Path, reference: Path, csv_log: bool = True, resumed: bool = True):
    """Bit-identical weights and metrics (and CSV log); ``resumed``: a run resumed mid-epoch,
    but for the epoch means of plain values logged in the epochs it resumed in
    (`assert_same_after_resume`)."""
    same = assert_same_after_resume if resumed else lambda got, want: _equal(got, want)
    same(read_metrics(run_dir), read_metrics(reference))
    got, want = checkpoint(run_dir), checkpoint(reference)
    assert got["global_step"] == want["global_step"]
    for key, value in want["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key
    if csv_log:
        same(csv_rows(run_dir), csv_rows(reference))


def _equal(got: object, want: object) -> None:
    assert got == want


@pytest.mark.exhaustive  # the slow tier resumes with CSV and wandb together (logger=default) below
@pytest.mark.parametrize("logger", ["csv", "default", "wandb"])
def test_a_two_process_run_resumes_exactly_with_each_logger(
    reference: Path, tmp_path: Path, logger: str
) -> None:
    """One epoch, then `resume=` to two: the same weights, test, val and train metrics (and
    CSV log) as the run that asked for two epochs from the start. wandb runs offline."""
    run_dir = tmp_path / "run"
    env = clean_env(HOME=str(tmp_path / "home"))
    run_train(
        *BASE, "trainer.max_epochs=1", f"logger={logger}", f"hydra.run.dir={run_dir}", env=env
    )
    run_train(f"resume={run_dir}", "trainer.max_epochs=2", env=env)
    assert_same_as(run_dir, reference, csv_log=logger != "wandb", resumed=False)
    if logger != "csv":
        assert len(list((run_dir / "wandb").glob("offline-run-*"))) == 2  # first part, resumed


@dataclass
class Stop:
    when: str  # train, validation (PauseAtStep)
    step: int
    signum: int
    to_group: bool  # Ctrl-C in a terminal reaches every process; `kill <pid>` one
    overrides: tuple[str, ...] = ()  # on the command line of the run that is stopped here


# 10 SIGTERM and 10 Ctrl-C (SIGINT), in the middle of epochs, at the last batch of an epoch
# (then after its validation), in the last validation; to the main process or to all.
TRAIN_STEPS = [1, 3, 5, 7, 9, 11, 13, 15, STEPS, STEPS + 2, STEPS + 4, STEPS + 6, STEPS + 8]
TRAIN_STEPS += [STEPS + 9, STEPS + 10, STEPS + 11, STEPS + 12, STEPS + 13, STEPS + 15]
CHAIN = [
    Stop("train", step, (signal.SIGTERM, signal.SIGINT)[n % 2], n % 3 == 1)
    for n, step in enumerate(TRAIN_STEPS)
] + [Stop("validation", 2 * STEPS, signal.SIGTERM, True)]


def start_paused(
    args: list[str], marker: Path, env: dict[str, str] | None = None
) -> processes.Started:
    """Start `python train.py <args>` in a process group of its own; return once paused."""
    process = processes.start(
        [sys.executable, str(ROOT / "train.py"), *pinned(args)],
        cwd=ROOT,
        env=env or clean_env(),
        new_session=True,
        merge_stderr=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"the run never paused:\n{process.communicate()[0][-3000:]}")
        time.sleep(0.1)
    return process


def signal_and_wait(process: processes.Started, signum: int, to_group: bool) -> tuple[float, str]:
    """Send the signal; return the seconds until the run exited, and its output. Fails if any
    process of the run is left."""
    started = time.monotonic()
    if to_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"no exit within 120 s of {signal.Signals(signum).name}")
    seconds = time.monotonic() - started
    time.sleep(1)
    assert not running_in_group(process.pid), "a process of the run is left"
    return seconds, output


def running_in_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still running: a killed child whose launcher exited at
    once stays a zombie until init reaps it, which a container's first process may never do."""
    running = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
            if int(fields[2]) == pgid and fields[0] not in "ZX":
                running.append(int(stat.parent.name))
    return running


def pause_at(stop: Stop, marker: Path) -> list[str]:
    return [
        "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
        f"+callbacks.pause.step={stop.step}",
        f"+callbacks.pause.when={stop.when}",
        f"+callbacks.pause.marker={marker}",
    ]


def stop_and_resume_along(
    chain: list[Stop],
    reference: Path,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    last: tuple[str, ...] = (),
) -> None:
    """One run stopped at each point of `chain` in turn and resumed after each stop: every stop
    exits 143 or 130 within seconds with the checkpoint of the step it landed on, and the run
    ends bit-identical to the reference (see `assert_same_as`)."""
    run_dir = tmp_path / "run"
    report = []
    for n, stop in enumerate(chain):
        marker = tmp_path / f"paused_{n}"
        first = n == 0
        args = [*BASE, f"hydra.run.dir={run_dir}"] if first else [f"resume={run_dir}"]
        process = start_paused([*args, *stop.overrides, *pause_at(stop, marker)], marker, env)
        seconds, output = signal_and_wait(process, stop.signum, stop.to_group)
        report.append(
            {
                "signal": signal.Signals(stop.signum).name,
                "to": "group" if stop.to_group else "main process",
                "when": f"{stop.when} step {stop.step}",
                "exit": process.returncode,
                "seconds": round(seconds, 1),
            }
        )
        assert process.returncode == 128 + stop.signum, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert f"python train.py resume={run_dir}" in output
        assert checkpoint(run_dir)["global_step"] == stop.step
    print("\n" + json.dumps(report, indent=1))
    (tmp_path / "signal_report.json").write_text(json.dumps(report, indent=1))

    run_train(f"resume={run_dir}", *last, env=env)  # after the last stop (in the last validation)
    assert_same_as(run_dir, reference)
    assert max(entry["seconds"] for entry in report) < 60


@pytest.mark.slow
def test_ctrl_c_mid_epoch_then_sigterm_in_validation_with_more_epochs_resume_exactly(
    reference: Path, tmp_path: Path
) -> None:
    """A run asked for 1 epoch with CSV and wandb: Ctrl-C to every process mid-epoch; resumed
    to 2 epochs, SIGTERM to the main process in the last validation; resumed again, it ends
    as the 2-epoch reference, and wandb holds one offline run per part."""
    chain = [
        Stop("train", 5, signal.SIGINT, True, ("trainer.max_epochs=1", "logger=default")),
        Stop("validation", 2 * STEPS, signal.SIGTERM, False, ("trainer.max_epochs=2",)),
    ]
    env = clean_env(HOME=str(tmp_path / "home"))
    # `resume=` reruns the first command (1 epoch) with what this one adds
    stop_and_resume_along(chain, reference, tmp_path, env, last=("trainer.max_epochs=2",))
    assert len(list((tmp_path / "run" / "wandb").glob("offline-run-*"))) == 3


@pytest.mark.slow
def test_a_stop_under_ddp_comes_at_the_next_agreement(reference: Path, tmp_path: Path) -> None:
    """The processes agree every `check_every_n_steps` batches (4 here): SIGTERM to the main
    process after step 5 stops both after step 8, with that step's checkpoint, and the resumed
    run ends as the reference."""
    chain = [
        Stop("train", 5, signal.SIGTERM, False, ("callbacks.stop_together.check_every_n_steps=4",))
    ]
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    args = [*BASE, *chain[0].overrides, f"hydra.run.dir={run_dir}", *pause_at(chain[0], marker)]
    process = start_paused(args, marker)
    _, output = signal_and_wait(process, signal.SIGTERM, to_group=False)
    assert process.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert "Exception was raised" not in output  # Lightning's line, naming SIGTERM for Ctrl-C too
    assert checkpoint(run_dir)["global_step"] == 8
    run_train(f"resume={run_dir}")
    assert_same_as(run_dir, reference)


@pytest.mark.soak
def test_sigterm_and_ctrl_c_at_20_points_each_stop_cleanly_and_resume_exactly(
    reference: Path, tmp_path: Path
) -> None:
    stop_and_resume_along(CHAIN, reference, tmp_path)


@pytest.mark.slow
def test_a_second_signal_stops_at_once_with_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    process = start_paused(
        [*BASE, f"hydra.run.dir={tmp_path / 'run'}", *pause_at(Stop("train", 5, 0, False), marker)],
        marker,
    )
    process.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # the first is under way (saving takes seconds): the second cuts it short
    seconds, output = signal_and_wait(process, signal.SIGTERM, False)
    assert process.returncode == 128 + signal.SIGTERM
    assert seconds < 10
    assert "Traceback" not in output
    assert output.count("SIGTERM again: stopping now, without saving.") == 1


@pytest.mark.slow
def test_a_signal_during_the_test_stops_it_and_resume_tests_again(
    reference: Path, tmp_path: Path
) -> None:
    """Training had finished: its metrics are kept, and `resume=` only runs the test."""
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    process = start_paused(
        [*BASE, f"hydra.run.dir={run_dir}", *pause_at(Stop("test", 0, 0, False), marker)], marker
    )
    seconds, output = signal_and_wait(process, signal.SIGTERM, False)
    assert process.returncode == 143 and seconds < 60, output[-3000:]
    assert "Training had finished; the test did not." in output
    assert f"python train.py resume={run_dir}" in output
    kept = read_metrics(run_dir)
    assert "train_acc_epoch" in kept and "val_acc" in kept and "test_acc" not in kept

    run_train(f"resume={run_dir}")
    assert_same_as(run_dir, reference, resumed=False)


def torchrun(*args: str, restarts: int = 0) -> list[str]:
    """`torchrun --standalone --nproc_per_node=2 [--max-restarts=N] train.py <args>`."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    launcher += ["--nproc_per_node=2", f"--max-restarts={restarts}"]
    return [*launcher, str(ROOT / "train.py"), *pinned(list(args))]


@pytest.mark.slow
def test_a_worker_group_torchrun_restarts_continues_the_run_and_ends_exactly(
    reference: Path, tmp_path: Path
) -> None:
    """Rank 1 crashes mid-epoch, after the first `last.ckpt`; torchrun (`--max-restarts=1`)
    ends rank 0 and starts both again: they agree on the run's directory again (its agent's
    store) and continue from its newest checkpoint, as the reference that never stopped."""
    crash = ["+callbacks.crash._target_=tests.machinery.rank_faults.CrashOnRank"]
    crash += ["+callbacks.crash.rank=1", f"+callbacks.crash.step={STEPS + 3}"]
    process = subprocess.Popen(
        torchrun(*BASE, *crash, restarts=1),
        cwd=ROOT,
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # torchrun's workers too, when it must be ended
    )
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"torchrun did not end within {TIMEOUT} s")
    assert process.returncode == 0, output[-4000:]
    assert f"rank 1 crashes at step {STEPS + 3}, as asked" in output
    (run_dir,) = (tmp_path / "train" / "runs").iterdir()  # one, for both launches
    assert f"torchrun restart 1: continuing the run in {run_dir} from" in output
    assert_same_as(run_dir, reference)


ONE_RANK_REFUSES = [
    # launcher, rank, before the processes meet ("build") or after ("setup")
    pytest.param("torchrun", 1, "build", marks=pytest.mark.slow),
    pytest.param("lightning", 1, "build", marks=pytest.mark.slow),
    pytest.param("lightning", 0, "setup", marks=pytest.mark.soak),
    pytest.param("torchrun", 0, "build", marks=pytest.mark.soak),
    pytest.param("torchrun", 1, "setup", marks=pytest.mark.soak),
    pytest.param("torchrun", 0, "setup", marks=pytest.mark.soak),
    pytest.param("lightning", 0, "build", marks=pytest.mark.soak),
    pytest.param("lightning", 1, "setup", marks=pytest.mark.soak),
]


@pytest.mark.parametrize(("launcher", "rank", "when"), ONE_RANK_REFUSES)
def test_a_rank_that_refuses_alone_leaves_no_process_waiting_for_it(
    tmp_path: Path, launcher: str, rank: int, when: str
) -> None:
    """Under torchrun and Lightning's own launcher (srun: `test_slurm.py`), one rank refuses
    (exit status 2) while the other goes on to the process group, or is in it: every process
    of the run has ended within seconds of the refusal, not torch's 30 minutes."""
    marker = tmp_path / "refused_at"
    refuse = ["+callbacks.refuse._target_=tests.machinery.rank_faults.RefuseOnRank"]
    refuse += [f"+callbacks.refuse.rank={rank}", f"+callbacks.refuse.when={when}"]
    args = [*BASE, *refuse, f"+callbacks.refuse.marker={marker}", "trainer.max_epochs=50"]
    args.append(f"hydra.run.dir={tmp_path / 'run'}")
    command = torchrun(*args) if launcher == "torchrun" else [
        sys.executable, str(ROOT / "train.py"), *pinned(args)
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"the run did not end within {TIMEOUT} s")
    ended = time.time()
    time.sleep(1)
    assert not running_in_group(process.pid), "a process of the run is left"
    assert process.returncode != 0
    assert f"rank {rank} refuses, as asked" in output, output[-3000:]
    assert ended - float(marker.read_text()) < 15, output[-3000:]
