"""Faults on one process of a run only, added from the command line as callbacks
(`+callbacks.refuse._target_=tests.machinery.rank_faults.RefuseOnRank`): one rank refuses or
crashes while the others go on, to show that none of them is left waiting for it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback

from my_project.machinery.errors import UserError


def launched_rank() -> int:
    """This process's global rank, as its launcher set it (torchrun, srun, Lightning's)."""
    for name in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def _note(marker: str | None) -> None:
    """When the fault happened (seconds since the epoch), for the test to time what follows."""
    if marker:
        Path(marker).write_text(f"{time.time()}\n")


class RefuseOnRank(Callback):
    """Refuses (bad input, exit status 2) on ``rank`` only: when the callbacks are built
    (``when="build"``, before the processes meet) or when training sets up (``"setup"``, after
    they met); ``marker``: a file that gets the time of the refusal."""

    def __init__(self, rank: int = 1, when: str = "build", marker: str | None = None) -> None:
        self.rank, self.when, self.marker = rank, when, marker
        if when == "build" and launched_rank() == rank:
            _note(marker)
            raise UserError(f"rank {rank} refuses, as asked (before the processes meet).")

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.when == "setup" and trainer.global_rank == self.rank:
            _note(self.marker)
            raise UserError(f"rank {self.rank} refuses, as asked (after the processes met).")


class CrashOnRank(Callback):
    """A bug on ``rank`` only (a traceback, exit status 1) after training step ``step``, in the
    first launch only: a worker group torchrun restarts goes on."""

    def __init__(self, rank: int = 1, step: int = 1) -> None:
        self.rank, self.step = rank, step

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        first = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first and trainer.global_rank == self.rank and trainer.global_step == self.step:
            raise RuntimeError(f"rank {self.rank} crashes at step {self.step}, as asked")
