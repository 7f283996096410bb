"""Signals outside the training loop: between fit and test, and what the handlers do.

The stops during training (one process and two) are in test_resume.py and
test_ddp_lifecycle.py.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lightning.pytorch import Callback, LightningModule, Trainer

from my_project.machinery.reliability import signals

from . import processes
from .helpers import (
    DOCS_STYLE,
    ROOT,
    clean_env,
    pinned,
    read_metrics,
    run_entry,
    run_main_in_process,
)

RUN = [*DOCS_STYLE, "trainer.max_epochs=1", "logger=csv", "trainer.deterministic=true", "seed=7"]


@pytest.mark.slow
def test_ctrl_c_between_fit_and_test_exits_130_and_resume_runs_the_test(tmp_path: Path) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "paused"
    process = processes.start(
        [
            sys.executable,
            str(ROOT / "train.py"),
            *pinned(
                [
                    *RUN,
                    f"hydra.run.dir={run_dir}",
                    "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
                    "+callbacks.pause.when=train_end",
                    f"+callbacks.pause.marker={marker}",
                ]
            ),
        ],
        cwd=ROOT,
        env=clean_env(),
        merge_stderr=True,
    )
    while not marker.exists():
        assert process.poll() is None, process.communicate()[0][-3000:]
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output[-3000:]
    assert "Traceback" not in output
    assert "Stopped by Ctrl-C. Training had finished; the test did not." in output
    assert f"python train.py resume={run_dir}" in output
    fit_metrics = read_metrics(run_dir)
    assert "train_acc_epoch" in fit_metrics and not any(k.startswith("test") for k in fit_metrics)

    result = run_entry("train", f"resume={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_metrics(run_dir)
    assert "test_acc" in metrics
    assert {k: v for k, v in metrics.items() if not k.startswith("test")} == fit_metrics


def test_outside_training_a_signal_stops_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to save (building the data, evaluating): the handler raises at once."""
    signals.install_handlers()
    try:
        with pytest.raises(signals.StopRequested) as stop:
            signal.raise_signal(signal.SIGTERM)
        assert stop.value.signum == signal.SIGTERM
        assert signals.requested_signal() == signal.SIGTERM
    finally:
        signals.forget_requests()  # a later Trainer of this process must not stop
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_stop_message_says_what_is_saved_and_how_to_go_on(tmp_path: Path) -> None:
    assert "nothing to resume" in signals.stopped_message(signal.SIGTERM, tmp_path, False)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"x")
    message = signals.stopped_message(signal.SIGINT, tmp_path, True)
    assert message.startswith("Stopped by Ctrl-C. Training had finished; the test did not.")
    assert f"python train.py resume={tmp_path}" in message


class StopsAsTrainingStarts(Callback):
    """A stop that lands as the fit starts (the processes of a DDP run starting): what the
    handler raises outside the training loop."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        raise signals.StopRequested(signal.SIGTERM)


def signalled_after(module: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``module.name`` sends this process SIGTERM once it has done its work."""
    original = getattr(module, name)

    def then_signalled(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if name != "print_config_tree" or kwargs.get("save_to"):  # once config_tree.log is there
            signal.raise_signal(signal.SIGTERM)
        return result

    monkeypatch.setattr(module, name, then_signalled)


@pytest.mark.parametrize("when", ["config tree written", "training starting"])
def test_a_stop_before_the_first_checkpoint_leaves_no_run_directory(
    when: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the run wrote by then (`.hydra`, `train.log`, `config_tree.log`, `config.yaml`,
    the CSV log) goes with it: there is nothing to resume."""
    from my_project.machinery.run import record

    args = [*RUN, f"hydra.run.dir={tmp_path / 'logs' / 'run'}"]
    if when == "config tree written":
        signalled_after(record, "print_config_tree", monkeypatch)
    else:
        args.append(f"+callbacks.stop._target_={__name__}.StopsAsTrainingStarts")
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert code == 143, err[-3000:]
    assert "Stopped by SIGTERM" in err and "Traceback" not in err, err[-3000:]
    assert not (tmp_path / "logs").exists(), sorted((tmp_path / "logs").rglob("*"))


def test_a_signal_after_the_run_finished_gets_its_line_and_keeps_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from my_project.machinery.run import record

    signalled_after(record, "finish", monkeypatch)
    run_dir = tmp_path / "run"
    code, err = run_main_in_process(
        "train", [*RUN, f"hydra.run.dir={run_dir}"], tmp_path / "logs", monkeypatch
    )
    assert code == 143, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line == (
        "Stopped by SIGTERM after the run had finished: nothing is lost; everything it wrote is "
        f"in {run_dir}."
    )
    assert "test_acc" in read_metrics(run_dir)
    assert list((run_dir / "checkpoints").glob("*.ckpt"))


def _train_as_a_slurm_task(run_dir: Path, job: str) -> Any:
    """`python train.py` as the one task of SLURM batch job ``job`` (a plain `python`: the warm
    processes end without the interpreter's exit, where Python restores default actions)."""
    import subprocess

    slurm = {"SLURM_JOB_ID": job, "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "1"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *pinned([*RUN, f"hydra.run.dir={run_dir}"])],
        cwd=ROOT,
        env=clean_env(**slurm, SLURM_PROCID="0", SLURM_NTASKS_PER_NODE="1", SLURM_NNODES="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (Linux's /proc: SigCgt)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(
        next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16
    )
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_sigusr1_while_the_job_starts_stops_it_before_the_run_began_not_kills_it(
    tmp_path: Path,
) -> None:
    """SLURM sends `--signal=USR1@N` up to a minute early: with a short time limit it comes as
    the job starts. It is taken from before Hydra composes (its default action killed the job,
    exit 138 by the signal, FAILED, a run directory left): a stop before the run began, one
    line, nothing kept, then the requeue (here `scontrol` fails: no such job)."""
    run_dir = tmp_path / "run"
    process = _train_as_a_slurm_task(run_dir, "4243")
    while not _catches(process.pid, signal.SIGUSR1):
        assert process.poll() is None, process.communicate()[0][-3000:]
        time.sleep(0.002)
    assert not run_dir.exists()  # taken before Hydra made the run directory
    process.send_signal(signal.SIGUSR1)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGUSR1, output[-3000:]
    assert "Stopped by SIGUSR1 before the run began; nothing is kept." in output, output
    assert "Traceback" not in output and not run_dir.exists()


def test_sigusr1_after_the_run_finished_ends_the_slurm_job_as_finished(tmp_path: Path) -> None:
    """SLURM's `--signal=USR1@N` can come once the run is done (its records written, or as the
    process exits): there is nothing to save or requeue, so the job ends as the finished run
    it is, exit status 0 (not killed by the signal: FAILED). A plain `python`: the warm
    processes end without the interpreter's exit, where Python restores the default action."""
    run_dir = tmp_path / "run"
    process = _train_as_a_slurm_task(run_dir, "4242")
    while not (run_dir / "metrics.json").exists():  # written once the run has finished
        assert process.poll() is None, process.communicate()[0][-3000:]
        time.sleep(0.05)
    while process.poll() is None:  # the signal in every moment left, to the process's end
        process.send_signal(signal.SIGUSR1)
        time.sleep(0.02)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output[-3000:]
    assert not any(said in output for said in ("Stopped by", "Requeued", "scontrol")), output
    assert "test_acc" in read_metrics(run_dir)


def test_a_requeue_signal_said_after_the_run_finished_ends_the_job_as_finished(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGUSR1 that came during the test, taken up once the run's records were written: the
    finished run is not requeued (it said "after the run had finished: nothing is lost", then
    requeued the job to run the test again); a SIGTERM there still gets its line and status."""
    from my_project.machinery.run import entry

    monkeypatch.setenv("SLURM_JOB_ID", "4244")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    monkeypatch.setattr(entry, "job_output_dir", lambda: None)  # no Hydra job in this test
    entry._said_after_finish([signal.SIGUSR1])  # returns: the job ends with the run's status
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as stop:
        entry._said_after_finish([signal.SIGTERM])
    assert stop.value.code == 128 + signal.SIGTERM
    assert "Stopped by SIGTERM after the run had finished" in capsys.readouterr().err
