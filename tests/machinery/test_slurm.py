"""Jobs submitted to a real SLURM scheduler (a one-node cluster this module starts,
`slurm_cluster.py`): the sbatch script of docs/machinery.md as written; a job requeued, or sent
SIGUSR1, mid-training, which continues its run and ends as the job left alone; a rank that
refuses while the other goes on; a sweep through Hydra's submitit launcher.

Every job runs the docs-style module for a few epochs, two tasks of DDP on the CPU (gloo),
deterministic (`slurm_jobs.py`). The jobs are submitted together when the module starts (they
share the cores), and each test waits for its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import slurm_cluster
from .helpers import read_metrics
from .slurm_jobs import (
    ARGS,
    JOB_TIMEOUT,
    STEPS_PER_EPOCH,
    Job,
    Submitter,
    assert_same_run,
    docs_script,
    pause_at,
    rank_zero_late,
    refuse_on,
    slurm_time,
    without_kill_on_bad_exit,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# The template's grace of 10 s, a poll of the step, SLURM's ending of the job.
ENDED_WITHIN_S = 15


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(f"no SLURM cluster: {reason}")
    with slurm_cluster.running(tmp_path_factory.mktemp("slurm")) as running:
        yield running


@dataclass
class Jobs:
    left_alone: Job
    requeued: Job
    usr1: Job
    refusing: Job
    sweep: subprocess.Popen[str]
    sweep_folder: Path
    base: Path


@pytest.fixture(scope="module")
def jobs(
    cluster: slurm_cluster.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Jobs]:
    """Every job of this module, submitted at once (the sweep's process ended after)."""
    submitter = Submitter(cluster, tmp_path_factory.mktemp("jobs"))
    script, base = docs_script(), submitter.base
    sweep, sweep_folder = submitter.start_sweep(
        "sweep", *ARGS, "trainer.max_epochs=1", "model.lr=0.01,0.02"
    )
    yield Jobs(
        left_alone=submitter.submit("left_alone", script, *ARGS),
        requeued=submitter.submit(
            "requeued", script, *ARGS, *pause_at(STEPS_PER_EPOCH + 3, base / "requeued_paused")
        ),
        usr1=submitter.submit(
            "usr1",
            rank_zero_late(script),
            *ARGS,
            *pause_at(STEPS_PER_EPOCH + 5, base / "usr1_paused"),
        ),
        refusing=submitter.submit(
            "refusing",
            without_kill_on_bad_exit(script),
            *ARGS,
            *refuse_on(1, "build", base / "refused_at"),
        ),
        sweep=sweep,
        sweep_folder=sweep_folder,
        base=base,
    )
    if sweep.poll() is None:
        sweep.kill()
        sweep.wait()


def test_the_docs_script_as_written_trains_and_tests_a_two_task_ddp_job(jobs: Jobs) -> None:
    job = jobs.left_alone
    job.completed()
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in job.output
    assert {"test_acc", "test_loss", "val_acc"} <= set(read_metrics(job.run_dir))
    assert list(job.run_dir.parent.iterdir()) == [job.run_dir]  # one directory for both tasks
    launch = json.loads((job.run_dir / ".launch.json").read_text())
    assert launch["slurm_job"].endswith(f":{job.job_id}")
    assert "The `srun` command is available" not in job.output


def test_a_job_requeued_mid_training_continues_its_run_and_ends_as_the_job_left_alone(
    jobs: Jobs,
) -> None:
    """`scontrol requeue` (what a preemption does) after the first `last.ckpt`, mid-epoch:
    SIGTERM, a checkpoint, SLURM starts the job again, and it continues from there."""
    job = jobs.requeued
    job.wait_for(jobs.base / "requeued_paused")
    assert (job.run_dir / "checkpoints" / "last.ckpt").is_file()
    job.cluster.run("scontrol", "requeue", job.job_id)
    assert job.completed()["Restarts"] == "1"
    assert f"SLURM job {job.job_id} restarted (1): continuing the run in" in job.output
    assert "Stopped by SIGTERM" in job.output
    assert_same_run(job, jobs.left_alone)


def test_sigusr1_before_the_time_limit_saves_requeues_and_the_job_continues(jobs: Jobs) -> None:
    """`#SBATCH --signal=USR1@90` sends SIGUSR1 to every task before the time limit (here
    `scancel --signal=USR1`, as SLURM sends it): a checkpoint, `scontrol requeue` by rank 0."""
    job = jobs.usr1
    job.wait_for(jobs.base / "usr1_paused")
    job.cluster.run("scancel", "--signal=USR1", job.job_id)
    assert job.completed()["Restarts"] == "1"
    assert "Stopped by SIGUSR1" in job.output
    assert f"Requeued SLURM job {job.job_id}: when it starts again, it continues" in job.output
    assert_same_run(job, jobs.left_alone)


def test_the_tasks_of_a_job_never_refuse_each_others_records(jobs: Jobs) -> None:
    """The SIGUSR1 job's rank 0 started 4 s after its rank 1 (`rank_zero_late`), both times:
    rank 1 writes no Hydra record into the run directory, so rank 0 found it fresh; only rank
    0's records are there, the run's and the restart's."""
    job = jobs.usr1
    job.completed()
    assert "holds a run already" not in job.output
    records = sorted(path.name for path in (job.run_dir / ".hydra").iterdir())
    assert records[:3] == ["config.yaml", "hydra.yaml", "overrides.yaml"], records
    assert len(records) == 4 and records[3].startswith("resume_"), records


def test_a_rank_that_refuses_ends_every_task_of_the_job_within_seconds(jobs: Jobs) -> None:
    """Rank 1 refuses (exit status 2) while rank 0 goes on to the process group, where it
    would wait for rank 1 (torch's 30 minutes), in a script without `--kill-on-bad-exit`."""
    job = jobs.refusing
    state = job.finished()
    assert state["JobState"] == "FAILED", job.output[-3000:]
    waited = slurm_time(state["EndTime"]) - float((jobs.base / "refused_at").read_text())
    assert waited <= ENDED_WITHIN_S, (waited, job.output[-3000:])
    assert "rank 1 refuses, as asked" in job.output
    assert "task 1: Exited with exit code 2" in job.output and "task 0: Killed" in job.output


def test_a_submitit_sweep_runs_each_job_as_a_ddp_run_that_trains_and_tests(jobs: Jobs) -> None:
    output, _ = jobs.sweep.communicate(timeout=JOB_TIMEOUT)
    assert jobs.sweep.returncode == 0, output[-4000:]
    (sweep_dir,) = (jobs.sweep_folder / "logs" / "train" / "multiruns").iterdir()
    assert sorted(path.name for path in sweep_dir.iterdir()) == [
        ".submitit",
        "0",
        "1",
        "multirun.yaml",
    ]
    for number in ("0", "1"):
        assert {"test_acc", "test_loss", "val_acc"} <= set(read_metrics(sweep_dir / number))
    logs = "".join(path.read_text() for path in (sweep_dir / ".submitit").rglob("*_log.*"))
    assert logs.count("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2") == 2, logs[-3000:]


def test_no_job_of_this_module_is_left_behind(jobs: Jobs, cluster: slurm_cluster.Cluster) -> None:
    deadline = time.monotonic() + 60
    while (left := cluster.run("squeue", "-h").strip()) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == ""
