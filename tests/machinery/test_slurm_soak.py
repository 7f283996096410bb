"""The SLURM tier's longer jobs (`make test-all`, not CI): a real time limit with `--signal`,
submitit's own time-out and preemption in a sweep, the other ranks and moments of a refusal,
and many fresh jobs racing for their run directories (`test_slurm.py` holds the CI tier)."""

from __future__ import annotations

import json
from collections.abc import Iterator

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
    assert_same_run_dirs,
    docs_script,
    pause_at,
    refuse_on,
    slurm_time,
    without_kill_on_bad_exit,
)

pytestmark = [pytest.mark.slurm, pytest.mark.soak]
FRESH_JOBS = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(f"no SLURM cluster: {reason}")
    with slurm_cluster.running(tmp_path_factory.mktemp("slurm")) as running:
        yield running


@pytest.fixture(scope="module")
def submitter(
    cluster: slurm_cluster.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Submitter:
    return Submitter(cluster, tmp_path_factory.mktemp("jobs"))


@pytest.fixture(scope="module")
def left_alone(submitter: Submitter) -> Job:
    job = submitter.submit("left_alone", docs_script(), *ARGS)
    job.completed()
    return job


def test_a_job_at_its_time_limit_saves_requeues_itself_and_continues(
    submitter: Submitter, left_alone: Job
) -> None:
    """A 1-minute job whose rank 0 waits after a step: SIGUSR1 comes from the time limit
    itself (`--signal=USR1@40`, the command line's over the script's 90 s, longer than the
    job), sometime in the minute (SLURM looks at time limits every 30 s or so)."""
    marker = submitter.base / "time_limit_paused"
    job = submitter.submit(
        "time_limit",
        docs_script(),
        *ARGS,
        *pause_at(STEPS_PER_EPOCH + 3, marker),
        "+callbacks.pause.timeout=300",
        options=("--time=1", "--signal=USR1@40"),
    )
    state = job.completed()
    assert state["Restarts"] == "1"
    assert "Stopped by SIGUSR1" in job.output and f"Requeued SLURM job {job.job_id}" in job.output
    assert_same_run(job, left_alone)


def test_sweep_jobs_at_their_time_limit_continue_through_submitit(
    submitter: Submitter,
) -> None:
    """Two jobs of a sweep, each paused after a step until its 1-minute time limit nears
    (submitit asks SLURM for SIGUSR2 `signal_delay_s` before it): each saves, submitit
    requeues it (a time-out of `max_num_timeout`), and it continues its run: both end as the
    same sweep left alone."""
    paused = submitter.base / "sweep_paused_${hydra:job.num}"
    args = [*ARGS, "model.lr=0.01,0.02", "hydra.launcher.timeout_min=1"]
    args += ["hydra.launcher.signal_delay_s=40", *pause_at(STEPS_PER_EPOCH + 3, paused)]
    args += ["+callbacks.pause.timeout=300"]
    sweep, folder = submitter.start_sweep("sweep", *args)
    reference, reference_folder = submitter.start_sweep(
        "sweep_left_alone", *ARGS, "model.lr=0.01,0.02"
    )
    try:
        output, _ = sweep.communicate(timeout=2 * JOB_TIMEOUT)
        reference.communicate(timeout=JOB_TIMEOUT)
    finally:
        for process in (sweep, reference):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert sweep.returncode == 0, output[-4000:]
    (sweep_dir,) = (folder / "logs" / "train" / "multiruns").iterdir()
    (reference_dir,) = (reference_folder / "logs" / "train" / "multiruns").iterdir()
    logs = "".join(path.read_text() for path in (sweep_dir / ".submitit").rglob("*_log.*"))
    assert logs.count("restarted (1): continuing the run in") == 2, logs[-4000:]
    for number in ("0", "1"):
        assert_same_run_dirs(sweep_dir / number, reference_dir / number, 3 * STEPS_PER_EPOCH)


@pytest.mark.parametrize(("rank", "when"), [(0, "build"), (1, "setup"), (0, "setup")])
def test_a_rank_that_refuses_at_any_moment_ends_every_task_within_seconds(
    submitter: Submitter, rank: int, when: str
) -> None:
    marker = submitter.base / f"refused_{rank}_{when}"
    job = submitter.submit(
        f"refusing_{rank}_{when}",
        without_kill_on_bad_exit(docs_script()),
        *ARGS,
        *refuse_on(rank, when, marker),
    )
    state = job.finished()
    assert state["JobState"] == "FAILED", job.output[-3000:]
    assert slurm_time(state["EndTime"]) - float(marker.read_text()) <= 15, job.output[-3000:]
    assert f"rank {rank} refuses, as asked" in job.output


def test_many_fresh_jobs_start_without_a_task_refusing_another(submitter: Submitter) -> None:
    """Submitted at once, so that their tasks compose and write at every moment of each
    other's: none is refused, each has one run directory with rank 0's Hydra record."""
    jobs = [
        submitter.submit(f"fresh_{n}", docs_script(), *ARGS, "trainer.max_epochs=1")
        for n in range(FRESH_JOBS)
    ]
    for job in jobs:
        job.completed()
        assert "holds a run already" not in job.output
        assert (job.run_dir / ".hydra" / "overrides.yaml").is_file()
        assert "test_acc" in read_metrics(job.run_dir)
        assert json.loads((job.run_dir / ".launch.json").read_text())
    print(f"\n{FRESH_JOBS} fresh jobs of two tasks, none refused")
