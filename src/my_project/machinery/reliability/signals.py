"""SIGTERM and Ctrl-C stop training between two batches, with a checkpoint and a resume hint.

What Lightning 2.6 does by itself: on SIGTERM it sets ``trainer.received_sigterm``, finishes
the current batch and raises ``SIGTERMException`` (a ``SystemExit`` whose exit status is 0,
so a scheduler would think the job succeeded) without saving anything; on Ctrl-C it raises
``KeyboardInterrupt`` wherever the program is, and exits with status 1, also without saving.
On SLURM with auto-requeue it additionally saves and requeues on the requeue signal.

Here, during training, the first Ctrl-C is turned into SIGTERM (so both take Lightning's
"stop between batches" path, where ``callbacks.LastCheckpoint`` saves ``last.ckpt``); a
second Ctrl-C stops at once. The run then exits with 128 + the signal number (130 for
Ctrl-C, 143 for SIGTERM), after printing how to resume.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

_received: list[int] = []


def _sigint_as_sigterm(signum: int, frame: FrameType | None) -> None:
    _received.append(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: stop now
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        raise KeyboardInterrupt  # Lightning is not running: nothing to save
    print(
        "\nCtrl-C: stopping after the current batch and saving a checkpoint "
        "(press Ctrl-C again to quit at once).",
        file=sys.stderr,
        flush=True,
    )
    os.kill(os.getpid(), signal.SIGTERM)


def resume_hint(run_dir: str | Path) -> str:
    return f"python train.py resume={run_dir}"


@contextmanager
def stop_cleanly_on_signals(run_dir: str | Path, announce: bool = True) -> Iterator[None]:
    """Run the block with Ctrl-C acting as SIGTERM; exit 128+signal with a resume hint."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT)
    if in_main_thread:
        signal.signal(signal.SIGINT, _sigint_as_sigterm)
    _received.clear()
    try:
        yield
    except SIGTERMException:
        signum = _received[0] if _received else signal.SIGTERM
        if announce:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            checkpoint = Path(run_dir) / "checkpoints" / "last.ckpt"
            saved = f"The newest checkpoint is {checkpoint}. " if checkpoint.is_file() else ""
            print(
                f"\nStopped by {name}. {saved}Resume with:\n    {resume_hint(run_dir)}\n",
                file=sys.stderr,
                flush=True,
            )
        sys.exit(128 + int(signum))
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
