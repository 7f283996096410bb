"""Which process this is, what every process holds, and a Hydra callback that makes runs of
several processes behave. Imported by Hydra before any job runs (configs/hydra/default.yaml),
so it stays light: torch is imported only where several processes already run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, read_write

# Where launchers put a process's rank: torchrun and Lightning's launcher (RANK, LOCAL_RANK
# with NODE_RANK), SLURM's srun (SLURM_PROCID). Before any is set: rank 0.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")
_PACKAGE = __name__.split(".")[0]
LAUNCHER_PID = f"{_PACKAGE.upper()}_LAUNCHER_PID"  # the launcher's pid, in its children
_job_end_hooks: list[Callable[[bool], None]] = []
_stop_while_blocked_hooks: list[Callable[[int], None]] = []
T = TypeVar("T")


def die_with_launcher() -> None:
    """In a child of this project's DDP launcher: die with it, however it dies (killed during
    start-up, it cannot tell its children, which would wait 30 minutes). Linux only."""
    expected = os.environ.get(LAUNCHER_PID, "")
    if not expected.isdigit() or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PDEATHSIG
    if os.getppid() != int(expected):  # the launcher died before the line above
        os._exit(128 + 9)


def is_rank_zero() -> bool:
    """True in the process that launched the others (and in any single-process run)."""
    return all(os.environ.get(var, "0") == "0" for var in _RANK_VARIABLES)


def gather_from_ranks(value: T) -> list[T]:
    """``value`` of every process in rank order: a collective every process must reach."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def at_stop_while_blocked(hook: Callable[[int], None]) -> Callable[[], None]:
    """Run ``hook(signum)`` when a stop signal ends this process inside
    :func:`stop_signals_end_at_once`; returns what unregisters it."""
    _stop_while_blocked_hooks.append(hook)
    return lambda: _stop_while_blocked_hooks.remove(hook)


@contextlib.contextmanager
def stop_signals_end_at_once() -> Iterator[None]:
    """SIGTERM and Ctrl-C end this process at once inside, after the hooks of
    :func:`at_stop_while_blocked` (the run's line, its directory), exit status 128 + the signal.

    For where torch waits in C++ (processes meeting), where Python runs no handler until it
    returns: a launcher ending the run because another process stopped (torchrun, srun) would
    wait out its grace, then kill it without a word. Python's C handler still writes the
    signal's number to the wakeup fd, which a thread of this process reads.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    leaving = threading.Event()

    def watch() -> None:
        received = os.read(read, 1)
        if leaving.is_set() or not received:
            return
        for hook in list(_stop_while_blocked_hooks):
            with contextlib.suppress(Exception):
                hook(received[0])
        os._exit(128 + received[0])

    previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    stops = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, lambda *_: None) for signum in stops}
    watcher = threading.Thread(target=watch, name="stop-while-blocked", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        leaving.set()
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(previous_fd)
        with contextlib.suppress(OSError):
            os.write(write, b"\0")  # the watcher returns
        watcher.join(timeout=5)
        os.close(read)
        os.close(write)


def at_job_end(hook: Callable[[bool], None]) -> None:
    """Run ``hook(succeeded)`` when the current Hydra job ends (DDP launchers clean up here)."""
    _job_end_hooks.append(hook)


def agree_across_ranks(what: str, propose: Callable[[], str]) -> str:
    """The value the first of torchrun's ranks proposed (only it calls ``propose``), through
    the agent's key-value store: torchrun starts every rank with the whole command, so each
    composes its own config, and a timestamped run directory differs between them."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return propose()
    from torch.distributed import TCPStore

    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    store = TCPStore(address, port, is_master=False, timeout=timedelta(seconds=120))
    key = f"{_PACKAGE}/{what}"
    if store.add(f"{key}/claims", 1) == 1:
        store.set(key, value := propose())
        return value
    return store.get(key).decode()


# Under srun, a task that ends alone (refused, crashed) leaves the others waiting for it in the
# process group; ended together (a stop signal: 128 + SIGTERM, SIGINT, SIGUSR1, SIGUSR2), none.
_ENDED_TOGETHER = {128 + int(s) for s in (signal.SIGTERM, signal.SIGINT)}
_ENDED_TOGETHER |= {128 + int(getattr(signal, s, 0)) for s in ("SIGUSR1", "SIGUSR2")}
WAITING_TASKS_GRACE_S = 10
# In a session of its own: poll the step each second; if it still runs after the grace and the
# job was not requeued meanwhile (a requeued job's steps start again at 0), kill it.
_END_STEP = """
for _ in $(seq "$4"); do sleep 1; scontrol show step "$1" >/dev/null 2>&1 || exit 0; done
scontrol -o show job "$2" | grep -q " Restarts=$3 " && scancel --signal=KILL "$1"
"""


def srun_task_step() -> str | None:
    """The job step (``JOB``, or ``JOB.STEP`` after the first) when srun started this very
    process as one of its tasks (not a process such a task started)."""
    job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
    if not job or not step or os.environ.get("SLURM_TASK_PID") != str(os.getpid()):
        return None
    return job if step == "0" else f"{job}.{step}"


def hydra_quoted(value: str) -> str:
    """``value`` quoted for a Hydra override (a path may hold any character)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def srun_step() -> str | None:
    """``JOB.STEP`` when srun started this process as one of several tasks."""
    job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", os.environ.get("SLURM_NTASKS", "1"))
    return f"{job}.{step}" if job and step and tasks.isdigit() and int(tasks) > 1 else None


def end_waiting_tasks(exit_code: int) -> None:
    """This task of an srun step ends alone (a refusal, a crash): the others may wait for it in
    the process group (torch's 30 minutes) or never start it. Unless every task has ended within
    `WAITING_TASKS_GRACE_S` (bad input every task found: rank 0 says it), SLURM ends the step,
    as `srun --kill-on-bad-exit=1` would: a watcher, started here, outlives this task."""
    step = srun_step()
    tools = shutil.which("scontrol") and shutil.which("scancel") and shutil.which("sh")
    if step is None or exit_code == 0 or exit_code in _ENDED_TOGETHER or not tools:
        return
    restarts = os.environ.get("SLURM_RESTART_COUNT") or "0"
    arguments = [step, step.split(".")[0], restarts, str(WAITING_TASKS_GRACE_S)]
    subprocess.Popen(
        ["sh", "-c", _END_STEP, "sh", *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # srun waits for its tasks' output to close
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _sweep_dir_for_its_jobs(config: DictConfig) -> None:
    """The sweep's directory, resolved once, among the overrides its jobs are composed with:
    submitit composes each job's config again in its SLURM job, where `unique_dir` would pick
    a directory of its own for every task. And no GPUs asked of SLURM for a CPU trainer."""
    try:
        sweep_dir = str(config.hydra.sweep.dir)
    except Exception:  # Hydra says what is wrong with it, as it makes the directory
        return
    config.hydra.sweep.dir = sweep_dir
    overrides = [o for o in config.hydra.overrides.hydra if not o.startswith("hydra.sweep.dir=")]
    config.hydra.overrides.hydra = [*overrides, f"hydra.sweep.dir={hydra_quoted(sweep_dir)}"]
    launcher = config.hydra.get("launcher") or {}
    cpu = str(OmegaConf.select(config, "trainer.accelerator", default="")).lower() == "cpu"
    if cpu and "gpus_per_node" in launcher:  # a CPU job that asks for GPUs: refused by SLURM
        config.hydra.launcher.gpus_per_node = None


def meet_afresh_after_a_torchrun_restart() -> None:
    """Before the processes of a worker group torchrun restarted meet: at a new port, where rank
    0 starts a store of its own. torch has them meet through its agent's store, which keeps what
    the failed group wrote there: gloo's or NCCL's set-up can then read a dead process's address
    and fail or hang (pytorch/pytorch#135712; here 2 restarts in 6 of a 10-line script)."""
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or restart in ("", "0"):
        return
    from torch.distributed import TCPStore

    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    store = TCPStore(address, port, is_master=False, timeout=timedelta(seconds=120))
    key = f"{_PACKAGE}/meeting_port/{restart}"
    if is_rank_zero():
        import socket

        with socket.socket() as probe:
            probe.bind(("", 0))
            store.set(key, str(probe.getsockname()[1]))
    os.environ["MASTER_PORT"] = store.get(key).decode()
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"


class DistributedRuns(Callback):
    """One run directory for all ranks, Hydra's files from rank 0 only, clean multirun jobs:
    torchrun's ranks take the run (or sweep) directory of the first rank to compose its config;
    srun's tasks (and any other rank) leave Hydra's record to rank 0, whose check of the directory
    another rank's record would meet; a sweep's directory is resolved once, before submitit
    pickles it for its jobs; the processes Lightning's launcher started are awaited when a job
    ends (`at_job_end`)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._share_dir(config, "run")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._share_dir(config, "sweep")

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hooks = list(_job_end_hooks)
        _job_end_hooks.clear()
        for hook in hooks:
            hook(job_return.status == JobStatus.COMPLETED)

    @staticmethod
    def _share_dir(config: DictConfig, mode: str) -> None:
        torchrun = "TORCHELASTIC_RUN_ID" in os.environ and int(os.environ.get("WORLD_SIZE", 1)) > 1
        with read_write(config.hydra):
            node = config.hydra[mode]
            if torchrun:
                node.dir = agree_across_ranks(f"{mode}_dir", lambda: str(node.dir))
            elif mode == "sweep":
                _sweep_dir_for_its_jobs(config)
            if not is_rank_zero():
                config.hydra.output_subdir = None
