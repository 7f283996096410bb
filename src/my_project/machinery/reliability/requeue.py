"""A job that its scheduler stops and starts again continues its run.

SLURM starts a requeued or preempted job again with the same command, the same job id and a
higher ``SLURM_RESTART_COUNT``; torchrun restarts a failed worker group with a higher
``TORCHELASTIC_RESTART_COUNT``. Such a restart of the launch that ran a run continues that run,
in its directory, from its newest checkpoint, as ``resume=`` does. Which launch ran a run is
recorded in its directory (``.launch.json``, when a run takes the directory): the SLURM job, and
a token torchrun's ranks agree on, which its restarts find again in its agent's store. A new
launch into a directory that holds a run is refused, as any new run is.

Under SLURM the requeue signal, ``SIGUSR1`` (``#SBATCH --signal=USR1@90``: 90 s before the time
limit, Lightning's convention) or submitit's ``SIGUSR2``, stops the run as SIGTERM does (every
process at one step, ``last.ckpt`` saved), then requeues the job. Lightning's own handler saves
from inside the signal handler: under DDP a checkpoint is a collective (every process's state is
gathered into it), met at whatever point each process was; Lightning installs it only where the
signal has no handler yet. Once the run has finished, the requeue signals are ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..distributed import agree_across_ranks, end_waiting_tasks, is_rank_zero

LAUNCH_FILE = ".launch.json"  # which launch (SLURM job, torchrun launch) last ran the run
_RESTART_COUNTS = {"slurm_job": "SLURM_RESTART_COUNT", "torchrun": "TORCHELASTIC_RESTART_COUNT"}
_continuing: dict[str, Path] = {}  # the run directory this job continues -> its checkpoint
_identity: dict[str, str] = {}  # this launch's, once asked (torchrun's ranks agree on it once)
_wrapped: dict[int, Any] = {}  # a requeue signal's handler before ours (submitit's)


def slurm_batch_job() -> str | None:
    """This process's SLURM job, as `scontrol requeue` names it, when it runs in a batch job
    (not an interactive allocation, which Lightning also leaves alone)."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job or os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return None
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else job


def launch_identity() -> dict[str, str]:
    """What stays the same when this launch is restarted, and differs between launches."""
    identity = {}
    if job := slurm_batch_job():
        identity["slurm_job"] = f"{os.environ.get('SLURM_CLUSTER_NAME', '')}:{job}"
    if "TORCHELASTIC_RUN_ID" in os.environ:
        identity["torchrun"] = agree_across_ranks("launch", lambda: uuid.uuid4().hex)
    return identity


def recorded_launch(run_dir: Path) -> dict[str, Any]:
    try:
        recorded = json.loads((run_dir / LAUNCH_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def record_launch(run_dir: Path) -> None:
    """Record this launch (as :func:`decide` found it) in ``run_dir``, written whole: another
    rank may be reading it."""
    identity = dict(_identity)
    if not identity or recorded_launch(run_dir) == identity:
        return
    partial = run_dir / f"{LAUNCH_FILE}.{os.getpid()}.part"
    partial.write_text(json.dumps(identity) + "\n")
    os.replace(partial, run_dir / LAUNCH_FILE)


def is_restart_of(run_dir: Path, identity: dict[str, str]) -> bool:
    """Whether this process is a restart of the launch that last ran the run in ``run_dir``."""
    recorded = recorded_launch(run_dir)
    return any(
        int(os.environ.get(_RESTART_COUNTS[key]) or 0) > 0 and recorded.get(key) == value
        for key, value in identity.items()
    )


def decide(run_dir: Path, task: str) -> bool:
    """On every process of a job, before its directory is claimed: whether this job is a restart
    of the launch that ran ``run_dir`` (then a training continues it from its newest checkpoint:
    :func:`checkpoint_to_continue`). Every process decides alike: on what earlier launches
    left (a checkpoint is written only once every process has started)."""
    from .resume import newest_checkpoint

    _continuing.clear()
    _identity.clear()
    _identity.update(identity := launch_identity())
    if task != "train" or not is_restart_of(run_dir, identity):
        return False
    if (checkpoint := newest_checkpoint(run_dir)) is not None:
        _continuing[str(run_dir.absolute())] = checkpoint
    if is_rank_zero():
        where = f"from {checkpoint}" if checkpoint else "from the start (no checkpoint yet)"
        print(f"{_restart_name()}: continuing the run in {run_dir} {where}.", flush=True)
    return True


def _restart_name() -> str:
    if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
        return f"SLURM job {slurm_batch_job()} restarted ({os.environ['SLURM_RESTART_COUNT']})"
    return f"torchrun restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}"


def checkpoint_to_continue(output_dir: Path) -> Path | None:
    """The checkpoint a restarted job continues its run in ``output_dir`` from, if it is one."""
    return _continuing.get(str(Path(output_dir).absolute()))


def requeue_signals() -> tuple[int, ...]:
    """The signals that ask a SLURM batch job to save and requeue: SIGUSR1, and SIGUSR2 where
    submitit handles it (its launcher asks for `--signal=USR2@90`)."""
    if slurm_batch_job() is None or not hasattr(signal, "SIGUSR1"):
        return ()
    submitit = callable(signal.getsignal(signal.SIGUSR2)) or signal.SIGUSR2 in _wrapped
    return (signal.SIGUSR1, *((signal.SIGUSR2,) if submitit else ()))


def take_requeue_signals(handler: Callable[[int, Any], None]) -> None:
    """``handler`` for the requeue signals, keeping submitit's to requeue with (main thread)."""
    for signum in requeue_signals():
        previous = signal.getsignal(signum)
        ours = previous is handler or getattr(previous, "before_the_run", False)
        if callable(previous) and not ours:
            _wrapped[signum] = previous
        signal.signal(signum, handler)


def ignore_requeue_signals() -> None:
    """Once a run has finished, a requeue signal has nothing to save or requeue: ignored until
    a next job takes it. Left to a Python handler, one that came as the process exits would
    kill it (Python restores the default action at its exit): a finished job ended FAILED."""
    if threading.current_thread() is threading.main_thread():
        for signum in requeue_signals():
            signal.signal(signum, signal.SIG_IGN)


def requeue_after(exit_code: int | None) -> None:
    """After a run stopped by a requeue signal (exit status 128 + it): on rank 0, requeue the
    job, which then continues the run (by submitit's handler where it had the signal)."""
    signum = (exit_code or 0) - 128
    job = slurm_batch_job()
    if job is None or signum not in requeue_signals() or not is_rank_zero():
        return
    for stop in (signal.SIGTERM, signal.SIGINT):  # the requeue's SIGTERM ends nothing left
        signal.signal(stop, signal.SIG_IGN)
    if callable(previous := _wrapped.get(signum)):
        print(f"{signal.Signals(signum).name}: submitit requeues job {job}.", file=sys.stderr)
        previous(signum, None)  # submitit: records a timeout, requeues, exits
        return
    try:
        result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
    except OSError as error:  # no scontrol here
        result = subprocess.CompletedProcess([], 1, "", str(error))
    if result.returncode == 0:
        print(
            f"Requeued SLURM job {job}: when it starts again, it continues this run from its "
            "newest checkpoint (or starts it again where it had none).",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(
            f"`scontrol requeue {job}` failed ({result.stderr.strip() or result.returncode}): "
            "the job ends here. Resume the run with `python train.py resume=<its directory>` "
            "(the checkpoint named above is in it).",
            file=sys.stderr,
            flush=True,
        )


@contextlib.contextmanager
def exit_for_the_scheduler() -> Iterator[None]:
    """Around an entry point, and around its job (submitit runs a job alone): what its exit
    status asks of a scheduler, once. Stopped by a requeue signal: requeue the job
    (:func:`requeue_after`); ended alone under srun: end the tasks that would wait for this one
    (`distributed.end_waiting_tasks`)."""
    try:
        yield
    except BaseException as error:
        if not getattr(error, "_scheduler_told", False):
            error._scheduler_told = True  # type: ignore[attr-defined]
            code = error.code if isinstance(error, SystemExit) else 1
            status = code if isinstance(code, int) else 0 if code is None else 1
            requeue_after(status)
            end_waiting_tasks(status)
        raise
