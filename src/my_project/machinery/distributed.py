"""Which process this is, and a Hydra callback that makes runs of several processes behave.

Imported by Hydra before any job runs (see configs/hydra/default.yaml), so it stays light:
torch is imported only where several processes are already running.

The processes a DDP launcher starts end with it, however it ends (``kill -9`` included):
Lightning's launcher starts the other ranks as child processes (`strategies/ddp.py`), and when
the launching process is killed outright during start-up nothing tells them: a child that has
not met it yet retries its connection for torch's default 30 minutes, one that has waits in
its first collective as long. :func:`die_with_launcher`, first thing in every entry point,
has each child ask the kernel for SIGKILL when its parent dies (Linux
``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread watches the parent's pid). A launcher that
died before the child got that far is caught by comparing the parent's pid with the one the
launcher handed down.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, read_write

# Where launchers put a process's global rank: torchrun and Lightning's own launcher (RANK,
# LOCAL_RANK with NODE_RANK), SLURM's srun (SLURM_PROCID). Before any is set: rank 0.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")
_STORE_KEY = __name__.split(".")[0] + "/{what}"  # the package's own keys

_job_end_hooks: list[Callable[[bool], None]] = []

# Set by the launcher in its children's environment: its own pid.
LAUNCHER_PID = f"{__name__.split('.')[0].upper()}_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCH_EVERY_S = 0.5
_KILLED = 128 + 9  # the status of a process killed by SIGKILL, as the shell reports it


def launcher_environment() -> dict[str, str]:
    """What the launcher adds to a child's environment."""
    return {LAUNCHER_PID: str(os.getpid())}


def die_with_launcher() -> None:
    """In a child of this project's DDP launcher: be killed when the launcher dies. Does
    nothing in any other process."""
    expected = os.environ.get(LAUNCHER_PID, "")
    if not expected.isdigit():
        return
    if not (sys.platform.startswith("linux") and _set_parent_death_signal()):
        threading.Thread(
            target=_watch_parent, args=(int(expected),), name="die-with-launcher", daemon=True
        ).start()
    if os.getppid() != int(expected):  # the launcher died before the line above
        os._exit(_KILLED)


def _set_parent_death_signal() -> bool:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    return False


def _watch_parent(expected: int) -> None:
    while os.getppid() == expected:
        time.sleep(_WATCH_EVERY_S)
    os._exit(_KILLED)


def is_rank_zero() -> bool:
    """True in the process that launched the others (and in any single-process run)."""
    return all(os.environ.get(var, "0") == "0" for var in _RANK_VARIABLES)


def at_job_end(hook: Callable[[bool], None]) -> None:
    """Run ``hook(succeeded)`` when the current Hydra job ends (DDP launchers clean up here)."""
    _job_end_hooks.append(hook)


def started_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def agree_across_ranks(what: str, propose: Callable[[], str], timeout_s: float = 120.0) -> str:
    """The value the first of torchrun's ranks proposed, so every rank uses the same one.

    torchrun starts every rank with the whole command, so each rank composes its own config
    and a timestamped run directory differs by microseconds between ranks. Before any process
    group exists, the agent's key-value store (MASTER_ADDR:MASTER_PORT) is what they share.
    Only the first rank calls ``propose`` (resolving a run directory creates it).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return propose()
    from torch.distributed import TCPStore

    store = TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=timeout_s),
    )
    key = _STORE_KEY.format(what=what)
    if store.add(f"{key}/claims", 1) == 1:
        value = propose()
        store.set(key, value)
        return value
    return store.get(key).decode()


class DistributedRuns(Callback):
    """One run directory for all ranks, Hydra's files from rank 0 only, clean multirun jobs.

    - torchrun: every rank takes the ``hydra.run.dir`` (``hydra.sweep.dir`` for ``-m``) of the
      first rank to compose its config; ranks other than 0 do not write ``.hydra/``.
    - Lightning's launcher (``trainer.devices=2``): its child processes are awaited and the
      process group is closed when the job ends, so the next job of ``-m`` starts afresh.
    """

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
        if not started_by_torchrun():
            return
        with read_write(config.hydra):
            node = config.hydra[mode]
            node.dir = agree_across_ranks(f"{mode}_dir", lambda: str(node.dir))
            if not is_rank_zero():
                config.hydra.output_subdir = None
