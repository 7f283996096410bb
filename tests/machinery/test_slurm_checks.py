"""What a run decides from SLURM's and torchrun's variables, without a cluster: the tasks of a
job against what Lightning will expect, the run directory a job's tasks share, whether a
restarted job continues the run it finds, and what its exit asks of the scheduler. The jobs
themselves run in `test_slurm.py`, on a real scheduler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from my_project.machinery import distributed
from my_project.machinery.errors import UserError
from my_project.machinery.preflight.devices import check_nodes_launched
from my_project.machinery.reliability import requeue, run_dir

SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_TASK_PID", "SLURM_NTASKS")
SLURM_VARIABLES += ("SLURM_NTASKS_PER_NODE", "SLURM_NNODES", "SLURM_JOB_NAME", "SLURM_PROCID")
SLURM_VARIABLES += ("SLURM_RESTART_COUNT", "SLURM_CLUSTER_NAME", "SLURM_ARRAY_JOB_ID")
SLURM_VARIABLES += ("SLURM_STEP_NUM_TASKS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A task srun started (rank 0 of 2, one node) of batch job 4242, not yet restarted."""
    for name in (*SLURM_VARIABLES, "RANK", "LOCAL_RANK", "NODE_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "tests")
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    monkeypatch.setenv("SLURM_TASK_PID", str(os.getpid()))
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "2")
    monkeypatch.setenv("SLURM_NNODES", "1")
    return monkeypatch


def test_ntasks_without_ntasks_per_node_is_refused_naming_the_sbatch_script(
    slurm: pytest.MonkeyPatch,
) -> None:
    """`#SBATCH -n 2`: Lightning would stop at its own RuntimeError, refused as a value of the
    command line or configs/, where the fix is not."""
    slurm.delenv("SLURM_NTASKS_PER_NODE")
    with pytest.raises(UserError) as refused:
        check_nodes_launched({"devices": 2, "num_nodes": 1})
    message = str(refused.value)
    assert "`#SBATCH --ntasks=2` or `-n 2`" in message
    assert "Fix the sbatch script" in message and "`#SBATCH --ntasks-per-node=2`" in message


def test_a_job_of_several_tasks_run_without_srun_is_refused(slurm: pytest.MonkeyPatch) -> None:
    """`python train.py` in the sbatch script itself: one process, which Lightning would have
    wait forever for the tasks that srun would have started."""
    slurm.delenv("SLURM_STEP_ID")
    with pytest.raises(UserError, match=r"not started by srun: .* wait forever for the others"):
        check_nodes_launched({"devices": 2, "num_nodes": 1})


@pytest.mark.parametrize(
    ("trainer", "fix"),
    [
        ({"devices": 4, "num_nodes": 1}, "`trainer.devices=2`, or `#SBATCH --ntasks-per-node=4`"),
        ({"devices": 2, "num_nodes": 2}, "`trainer.num_nodes=1`, or `#SBATCH --nodes=2`"),
    ],
)
def test_devices_or_nodes_other_than_the_jobs_are_refused_naming_both_fixes(
    slurm: pytest.MonkeyPatch, trainer: dict[str, int], fix: str
) -> None:
    with pytest.raises(UserError, match="Lightning runs one process per SLURM task") as refused:
        check_nodes_launched(trainer)
    assert fix in str(refused.value)


def test_a_job_as_lightning_expects_it_passes_and_interactive_or_torchrun_ones_are_left_alone(
    slurm: pytest.MonkeyPatch,
) -> None:
    check_nodes_launched({"devices": 2, "num_nodes": 1})
    slurm.delenv("SLURM_NTASKS_PER_NODE")
    for name, value in (("SLURM_JOB_NAME", "interactive"), ("TORCHELASTIC_RUN_ID", "x")):
        with slurm.context() as variables:
            variables.setenv(name, value)
            check_nodes_launched({"devices": 2, "num_nodes": 1})


def test_the_tasks_of_an_srun_step_name_one_run_directory_for_the_job(
    slurm: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each task composes its config at its own time; a requeued job runs its steps again."""
    slurm.setattr(run_dir, "_created", {})
    first = run_dir.unique_dir(str(tmp_path / "runs" / "2026-01-01_00-00-00"))
    assert first == str(tmp_path / "runs" / "slurm-4242")
    slurm.setattr(run_dir, "_created", {})  # the other task, a second later
    assert run_dir.unique_dir(str(tmp_path / "runs" / "2026-01-01_00-00-01")) == first
    slurm.setattr(run_dir, "_created", {})
    slurm.setenv("SLURM_STEP_ID", "1")  # the job's second srun
    second = run_dir.unique_dir(str(tmp_path / "runs" / "2026-01-01_00-00-02"))
    assert second == str(tmp_path / "runs" / "slurm-4242.1")
    slurm.setattr(run_dir, "_created", {})
    slurm.setenv("SLURM_TASK_PID", "1")  # a process a task started: a run of its own
    own = run_dir.unique_dir(str(tmp_path / "runs" / "2026-01-01_00-00-03"))
    assert own == str(tmp_path / "runs" / "2026-01-01_00-00-03")


def run_of_job(folder: Path, job: str, checkpoint: bool = True) -> Path:
    """A run directory that job ``job`` of cluster `tests` ran, with a checkpoint."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / requeue.LAUNCH_FILE).write_text(json.dumps({"slurm_job": f"tests:{job}"}))
    if checkpoint:
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "epoch_000.ckpt").write_bytes(b"older")
        (folder / "checkpoints" / "last.ckpt").write_bytes(b"newest")
    return folder


def test_a_restart_of_the_job_that_ran_the_run_continues_it_from_its_newest_checkpoint(
    slurm: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = run_of_job(tmp_path / "run", "4242")
    slurm.setenv("SLURM_RESTART_COUNT", "1")
    assert requeue.decide(folder, "train")
    assert requeue.checkpoint_to_continue(folder) == folder / "checkpoints" / "last.ckpt"
    from my_project.machinery.reliability.resume import resolve_checkpoint_path

    # whatever the command asked (a checkpoint to start from): the run's own newest
    assert resolve_checkpoint_path("pretrained.ckpt", folder) == str(
        folder / "checkpoints" / "last.ckpt"
    )
    assert not requeue.decide(folder, "eval")  # only a training continues


@pytest.mark.parametrize(
    ("job", "restarts", "why"),
    [
        ("4242", None, "the job's first start: a second srun of it into the same directory"),
        ("4242", "0", "the job's first start, SLURM_RESTART_COUNT set"),
        ("9999", "1", "another job's run, this one restarted"),
    ],
)
def test_a_job_that_is_not_a_restart_of_the_runs_own_is_refused_as_any_new_run(
    slurm: pytest.MonkeyPatch, tmp_path: Path, job: str, restarts: str | None, why: str
) -> None:
    folder = run_of_job(tmp_path / "run", job)
    if restarts is not None:
        slurm.setenv("SLURM_RESTART_COUNT", restarts)
    assert not requeue.decide(folder, "train"), why
    assert requeue.checkpoint_to_continue(folder) is None
    with pytest.raises(UserError, match="holds a run already"):
        run_dir.claim(folder, ("checkpoints",), "train")


def test_a_job_whose_id_an_earlier_job_had_is_refused_saying_slurm_reused_it(
    slurm: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The directory is named for the job (`slurm-<job>`), not chosen: the refusal says SLURM
    gave the id again, not to leave `hydra.run.dir` out (it was)."""
    folder = run_of_job(tmp_path / "slurm-4242", "4242")
    assert not requeue.decide(folder, "train")
    with pytest.raises(UserError) as refused:
        run_dir.claim(folder, ("checkpoints",), "train")
    message = str(refused.value)
    assert message.startswith(
        f"{folder} holds a run already (checkpoints), of an earlier SLURM job with this job's id "
        "(4242): SLURM reuses job ids"
    ), message
    assert f"resume={folder}" in message and "`hydra.run.dir=logs/train/runs/<name>`" in message
    assert "leave `hydra.run.dir`" not in message


def test_a_restart_before_the_first_checkpoint_starts_the_run_again_in_its_directory(
    slurm: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = run_of_job(tmp_path / "run", "4242", checkpoint=False)
    slurm.setenv("SLURM_RESTART_COUNT", "2")
    assert requeue.decide(folder, "train")
    assert requeue.checkpoint_to_continue(folder) is None


def test_a_run_records_the_job_that_ran_it_whole(slurm: pytest.MonkeyPatch, tmp_path: Path) -> None:
    requeue.decide(tmp_path, "train")
    requeue.record_launch(tmp_path)
    assert json.loads((tmp_path / requeue.LAUNCH_FILE).read_text()) == {"slurm_job": "tests:4242"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [requeue.LAUNCH_FILE]  # no .part left
    for name in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"):
        slurm.delenv(name, raising=False)
    assert requeue.launch_identity() == {}  # a run nobody launched records nothing


class Calls:
    def __init__(self) -> None:
        self.made: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.made.append(list(command))
        return subprocess.CompletedProcess(command, 0, "", "")


def exit_with(code: int) -> None:
    with pytest.raises(SystemExit), requeue.exit_for_the_scheduler():
        raise SystemExit(code)


def test_a_run_stopped_by_sigusr1_is_requeued_by_rank_0_only(slurm: pytest.MonkeyPatch) -> None:
    calls = Calls()
    slurm.setattr(requeue.subprocess, "run", calls)
    slurm.setattr(requeue, "end_waiting_tasks", lambda code: None)
    slurm.setattr(requeue.signal, "signal", lambda *args: None)  # it ignores SIGTERM, after
    exit_with(128 + signal.SIGUSR1)
    assert calls.made == [["scontrol", "requeue", "4242"]]
    exit_with(128 + signal.SIGTERM)  # a preemption: SLURM requeues it itself
    slurm.setenv("SLURM_PROCID", "1")
    exit_with(128 + signal.SIGUSR1)
    assert len(calls.made) == 1


@pytest.mark.parametrize(
    ("code", "ends"), [(2, True), (1, True), (0, False), (143, False), (138, False)]
)
def test_a_task_that_ends_alone_under_srun_has_slurm_end_the_others(
    slurm: pytest.MonkeyPatch, code: int, ends: bool
) -> None:
    """A refusal or a crash; not a stop every task takes together (a signal), nor success."""
    started: list[list[str]] = []
    slurm.setattr(distributed.subprocess, "Popen", lambda command, **kw: started.append(command))
    slurm.setattr(distributed.shutil, "which", lambda program: f"/usr/bin/{program}")
    slurm.setattr(requeue, "requeue_after", lambda code: None)
    exit_with(code)
    assert bool(started) == ends
    if ends:
        assert started[0][-4:] == ["4242.0", "4242", "0", str(distributed.WAITING_TASKS_GRACE_S)]
    started.clear()
    slurm.setenv("SLURM_NTASKS", "1")  # a task alone: nobody waits for it
    exit_with(code)
    assert started == []
