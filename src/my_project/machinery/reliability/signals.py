"""SIGTERM and Ctrl-C stop a run cleanly: training at a step every process agrees on, with a
checkpoint and a resume hint; anything else at once. A second signal stops at once, unsaved.

Lightning alone falls short: under DDP each process stops at the next batch *it* reaches (and
can hang in mismatched collectives), SIGTERM exits 0, and Ctrl-C raises anywhere. Here both
signals *record* a request: outside training it stops the run at once (`StopRequested`), in
training `StopTogether` takes it up between batches; the run exits with 128 + the signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.trainer.states import TrainerFn

from .. import lightning_compat as compat
from ..distributed import is_rank_zero
from . import requeue

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(BaseException):
    """A stop signal where nothing needs saving; a BaseException like ``KeyboardInterrupt``,
    so ordinary ``except Exception`` blocks let it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class _State:
    received: list[int] = []  # the stop signals this process received in the current job
    agreed = False  # the processes decided to stop (the signal may have reached another one)
    in_training_loop = False  # a Trainer with StopTogether runs: requests wait for a batch end
    finished = False  # the run's work is done: a request waits for its records to be written


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def requested_signal() -> int | None:
    """The first stop signal of this job (SIGTERM when only another process received one)."""
    return _State.received[0] if _State.received else signal.SIGTERM if _State.agreed else None


def _handle(signum: int, frame: FrameType | None) -> None:
    again, name = bool(_State.received), signal_name(signum)
    _State.received.append(signum)
    if _State.finished and not again:
        return  # said once the run's records are written (`run/entry.py`)
    if not (again or _State.in_training_loop):
        raise StopRequested(signum)
    if is_rank_zero():
        message = (
            f"{name} again: stopping now, without saving."
            if again
            else f"{name}: stopping after the current batch and saving a checkpoint "
            "(a second one stops at once, without saving)."
        )
        with contextlib.suppress(OSError):  # os.write: a handler may interrupt a print
            os.write(2, f"\n{message}\n".encode())
    if again:
        os._exit(128 + signum)


def install_handlers() -> None:
    """Make SIGTERM and Ctrl-C request a stop (see the module docstring); main thread only."""
    forget_requests()
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, _handle)
        requeue.take_requeue_signals(_handle)  # under SLURM: stop alike, then requeue


def forget_requests() -> None:
    """A job's stop requests and state gone (it ended): the next Trainer of this process, a
    notebook's or a test's, starts afresh."""
    _State.received, _State.agreed, _State.in_training_loop = [], False, False
    _State.finished = False


def run_finished() -> None:
    """The run's work is done (training, the test; a server is up): a stop request from now on
    lets its records (``metrics.json``...) be written whole, and is said after them, in one
    line; what the run wrote is kept. A requeue signal is ignored from now on."""
    _State.finished = True
    requeue.ignore_requeue_signals()


def has_finished() -> bool:
    return _State.finished


class StopTogether(Checkpoint):
    """Takes a stop request up between batches, on every process at the same step: after a
    batch (every ``check_every_n_steps`` under DDP), validation and an epoch, the processes agree
    whether any got a signal, and on yes all set Lightning's stop flag (``LastCheckpoint`` then
    saves). A ``Checkpoint``, so Lightning runs its hooks after every other callback's. In the
    test, each process stops at its next batch, saving nothing.
    """

    def __init__(self, check_every_n_steps: int = 10) -> None:
        self.check_every_n_steps = max(1, int(check_every_n_steps))

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage in ("fit", "test"):  # elsewhere a request stops the run at once
            _State.in_training_loop = True
            compat.skip_sigterm_broadcast(trainer)

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        _State.in_training_loop = False

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, error: Any) -> None:
        _State.in_training_loop = False

    def on_sanity_check_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _take_sigterm_back()  # Lightning registers its handler when a stage starts

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _take_sigterm_back()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return
        if trainer.world_size == 1 or (batch_idx + 1) % self.check_every_n_steps == 0:
            self._decide(trainer)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            self._decide(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Lightning's progress bar computes the epoch's metrics (a torchmetrics object logged
        # on_epoch syncs) on rank 0 alone: compute them on every process before our collective.
        if trainer.world_size > 1:
            _ = trainer.callback_metrics
        self._decide(trainer)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _take_sigterm_back()
        _stop_now()  # a request that came after training, before the test

    def on_test_batch_end(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        _stop_now()

    @staticmethod
    def _decide(trainer: Trainer) -> None:
        wanted = requested_signal() is not None
        if trainer.world_size > 1:  # one all-reduce and host sync (every N steps)
            wanted = trainer.strategy.reduce_boolean_decision(wanted, all=False)
        if not wanted:
            return
        _State.agreed = True
        if not _training_ends_here(trainer):  # else it finishes, and the test will not start
            compat.stop_between_batches(trainer)
            # Lightning's observer of the processes this one launched kills it when one exits
            # non-zero, as they will (128 + N) once saved: it watches this list, emptied.
            getattr(trainer.strategy.launcher, "procs", []).clear()


def _take_sigterm_back() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handle)  # Lightning's teardown restores it too


def _stop_now() -> None:
    if (signum := requested_signal()) is not None:
        raise StopRequested(signum)


def _training_ends_here(trainer: Trainer) -> bool:
    """Whether training ends here anyway (the last batch of the last epoch, `max_steps`)."""
    loop = trainer.fit_loop
    if loop.max_steps not in (None, -1) and trainer.global_step >= loop.max_steps:
        return True
    last_epoch = loop.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= loop.max_epochs
    return loop.epoch_loop.batch_progress.is_last_batch and (last_epoch or trainer.should_stop)


def stopped_message(signum: int, run_dir: str | Path | None, training_done: bool) -> str:
    """What the run says when a signal stopped it: what is saved, how to go on."""
    from .resume import newest_checkpoint

    name = signal_name(signum)
    if run_dir is None:  # not a training run (serve, predict): nothing to resume
        return f"Stopped by {name}."
    if (checkpoint := newest_checkpoint(Path(run_dir))) is None:
        return f"Stopped by {name} before the first checkpoint: nothing to resume."
    done = "Training had finished; the test did not. " if training_done else ""
    if signum in requeue.requeue_signals():  # the requeued job continues it: nothing to type
        return f"Stopped by {name}. {done}The newest checkpoint is {checkpoint}."
    return (
        f"Stopped by {name}. {done}The newest checkpoint is {checkpoint}. Resume with:\n"
        f"    python train.py resume={run_dir}"
    )
