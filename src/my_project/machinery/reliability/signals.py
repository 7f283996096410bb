"""SIGTERM and Ctrl-C stop a run cleanly: training at a step every process agrees on, with a
checkpoint and a resume hint; anything else at once. A second signal stops at once.

What Lightning 2.6 does by itself falls short: its SIGTERM handler runs a collective
(``dist.broadcast``) inside the signal handler and each process then stops at the next batch
*it* reaches, so the processes of a DDP run can stop at different steps, wait for each other
in mismatched collectives and hang; SIGTERM exits 0 (a scheduler would think the job
succeeded); Ctrl-C raises ``KeyboardInterrupt`` wherever the program is and exits 1. Here:

- :func:`install_handlers` (at the start of every job) makes SIGTERM and SIGINT only *record*
  the request; no collective, no exception, inside the handler. Outside training the
  request stops the run at once (:class:`StopRequested`, like ``KeyboardInterrupt``).
- :func:`stoppable` (around ``trainer.fit`` and ``trainer.test``) keeps Lightning's own handler
  out and adds :class:`StopTogether`: during training all processes decide together, after a
  batch, at the end of validation and of an epoch (an all-reduce of the request, under DDP),
  and a stop becomes Lightning's "stop between batches" on all of them at the same step,
  where ``callbacks.LastCheckpoint`` saves ``last.ckpt``. At the end of training it lets
  training finish (its metrics recorded) and stops before the test; during the test (nothing
  to save) the run stops at the next batch.
- The run exits with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM), after
  printing how to resume. A second signal prints one line and exits at once, stopping the
  processes this one launched.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn

from ..distributed import is_rank_zero

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(BaseException):
    """A stop signal arrived where nothing needs saving (outside training); a BaseException
    like ``KeyboardInterrupt``, so ordinary ``except Exception`` blocks let it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class _State:
    received: list[int] = []  # the stop signals this process received in the current job
    agreed = False  # the processes decided to stop (the signal may have reached another one)
    in_training_loop = False  # inside `stoppable`: the request is taken up between batches
    trainer: Any = None  # the Trainer of the current `stoppable`: its launcher's processes
    launched: list[subprocess.Popen] = []  # DDP processes this one started, once detached


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def requested_signal() -> int | None:
    """The first stop signal of this job, if one arrived (SIGTERM when only another process
    of the run received one)."""
    if _State.received:
        return _State.received[0]
    return signal.SIGTERM if _State.agreed else None


def _say(text: str) -> None:
    # os.write, not print: a handler may interrupt a print to the same stream.
    with contextlib.suppress(OSError):
        os.write(2, f"\n{text}\n".encode())


def _handle(signum: int, frame: FrameType | None) -> None:
    if _State.received:
        if is_rank_zero():
            _say(f"{signal_name(signum)} again: stopping now, without saving.")
        _kill(_launched_processes())
        os._exit(128 + signum)
    _State.received.append(signum)
    if not _State.in_training_loop:
        raise StopRequested(signum)
    if is_rank_zero():
        again = "press Ctrl-C" if signum == signal.SIGINT else "send it"
        _say(
            f"{signal_name(signum)}: stopping after the current batch and saving a checkpoint "
            f"({again} again to stop at once, without saving)."
        )


def install_handlers() -> None:
    """Make SIGTERM and Ctrl-C request a stop (see the module docstring); main thread only."""
    _State.received.clear()
    _State.agreed = False
    _State.in_training_loop = False
    _State.trainer = None
    _State.launched = []
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, _handle)


@contextlib.contextmanager
def stoppable(trainer: Trainer) -> Iterator[None]:
    """Run ``trainer.fit``/``trainer.test`` inside: a stop request is taken up between batches,
    by every process at the same step (:class:`StopTogether`)."""
    connector = trainer._signal_connector  # Lightning 2.x: what registers its SIGTERM handler
    register = connector.register_signal_handlers
    # Module-level functions (a partial of one), not closures or lambdas: the spawn launchers
    # (`ddp_spawn`) pickle the Trainer, these attributes included.
    connector.register_signal_handlers = functools.partial(_register_without_sigterm, register)  # type: ignore[method-assign]
    # Lightning 2.6 also broadcasts rank 0's stop flag before every batch under DDP (a
    # collective and a host sync per step); StopTogether's all-reduce decides instead, and the
    # flag is only ever set on every process at once, so that broadcast is left out.
    epoch_loop = trainer.fit_loop.epoch_loop
    if hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
        epoch_loop._broadcast_sigterm_tensor = _no_broadcast  # type: ignore[method-assign]
    callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
    if not any(isinstance(cb, StopTogether) for cb in callbacks):
        callbacks.append(StopTogether())
    _State.in_training_loop = True
    _State.trainer = trainer
    try:
        signum = requested_signal()
        if signum is not None:  # it arrived between two phases (e.g. after fit, before test)
            raise StopRequested(signum)
        yield
    finally:
        _State.in_training_loop = False
        connector.register_signal_handlers = register  # type: ignore[method-assign]
        if "_broadcast_sigterm_tensor" in vars(epoch_loop):
            del epoch_loop._broadcast_sigterm_tensor


def _register_without_sigterm(register: Any) -> None:
    """Lightning's ``register_signal_handlers``, then ours for SIGTERM."""
    register()  # Lightning's other handlers (SLURM's requeue signal) stay
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handle)


def _no_broadcast() -> None:
    """In place of Lightning's per-batch broadcast of rank 0's stop flag (see `stoppable`)."""


class StopTogether(Callback):
    """Takes up a stop request between batches, on every process at the same step.

    Training: after a batch (not the last of an epoch: validation and the epoch-end checkpoint
    come first), at the end of validation and at the end of an epoch, the processes all-reduce
    "did any of us get a signal" (one tiny collective, under DDP only), and on yes all set
    Lightning's stop flag, which stops them before the next batch. Test: each process stops
    at its next batch (the test saves nothing, and its processes may have different numbers of
    batches, so they cannot meet).
    """

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        if not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            self._decide(trainer)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            self._decide(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _settle_epoch_metrics(trainer)
        self._decide(trainer)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._stop_now()

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._stop_now()

    @staticmethod
    def _stop_now() -> None:
        signum = requested_signal()
        if signum is not None:
            raise StopRequested(signum)

    @staticmethod
    def _decide(trainer: Trainer) -> None:
        import torch
        import torch.distributed as dist

        wanted = requested_signal() is not None
        if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            flag = torch.tensor([int(wanted)], device=trainer.strategy.root_device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            wanted = bool(flag.item())
        if not wanted:
            return
        _State.agreed = True
        if _training_ends_here(trainer):
            return  # nothing left to stop: training ends, and the test will not start
        trainer._signal_connector.received_sigterm = True  # Lightning's "stop between batches"
        _detach_launched(trainer)


def _settle_epoch_metrics(trainer: Trainer) -> None:
    """Compute the epoch's logged metrics on every process before a collective of ours.

    Lightning's progress bar computes them on rank 0 alone, in its own ``on_train_epoch_end``
    (a torchmetrics object logged ``on_epoch`` syncs across processes when computed); the other
    processes compute them later. A collective of ours in between would meet that sync on
    rank 0 and hang. Computing them here first pairs rank 0's sync with everyone else's (the
    values are cached: no process computes them twice).
    """
    if trainer.world_size > 1:
        _ = trainer.callback_metrics  # computes every logged metric of the epoch, once


def _training_ends_here(trainer: Trainer) -> bool:
    """Whether training ends at this point anyway (the last batch of the last epoch, or
    `max_steps`): then it finishes, with its metrics, and the stop comes before the test."""
    loop = trainer.fit_loop
    max_epochs, max_steps = loop.max_epochs, loop.max_steps
    if max_steps not in (None, -1) and trainer.global_step >= max_steps:
        return True
    last_epoch = max_epochs not in (None, -1) and trainer.current_epoch + 1 >= max_epochs
    return loop.epoch_loop.batch_progress.is_last_batch and (last_epoch or trainer.should_stop)


def _detach_launched(trainer: Trainer) -> None:
    """Take the launched DDP processes from Lightning's child-process observer, which kills
    this process when a child exits non-zero: after a stop they exit 128 + N by design."""
    procs = getattr(getattr(trainer.strategy, "launcher", None), "procs", None)
    if procs:
        _State.launched = list(procs)
        procs.clear()  # the observer shares this list: empty, it stops watching


def _launched_processes() -> list[subprocess.Popen]:
    """The DDP processes this one started: detached ones, else those its launcher watches."""
    if _State.launched:
        return list(_State.launched)
    launcher = getattr(getattr(_State.trainer, "strategy", None), "launcher", None)
    return list(getattr(launcher, "procs", None) or [])


def _kill(processes: list[subprocess.Popen]) -> None:
    """SIGKILL (they may be waiting in a collective), and reap them."""
    for process in processes:
        with contextlib.suppress(OSError):
            process.kill()
    for process in processes:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            process.wait(timeout=5)


def end_launched(trainer: Trainer | None, timeout: float = 10.0) -> None:
    """Let the launched DDP processes finish their own stop (they exit by themselves once the
    checkpoint is saved); stop those still running after ``timeout`` seconds."""
    if trainer is not None:
        _detach_launched(trainer)
    for process in _launched_processes():  # still listed: a second signal stops them too
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _State.launched = []


def resume_hint(run_dir: str | Path) -> str:
    return f"python train.py resume={run_dir}"


def stopped_message(signum: int, run_dir: str | Path | None, training_done: bool) -> str:
    """What the run says when a signal stopped it: what is saved, how to go on."""
    name = signal_name(signum)
    if run_dir is None:
        return f"Stopped by {name}."
    from .resume import newest_checkpoint

    checkpoint = newest_checkpoint(Path(run_dir))
    if checkpoint is None:
        return f"Stopped by {name} before the first checkpoint; nothing to resume. Start it again."
    done = "Training had finished; the test did not. " if training_done else ""
    return (
        f"Stopped by {name}. {done}The newest checkpoint is {checkpoint}. Resume with:\n"
        f"    {resume_hint(run_dir)}"
    )
