"""A fault on one process of a run only: it refuses (bad input, exit status 2) while the others
go on, to show that none of them is left waiting for it."""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch import Callback

from my_project.machinery.errors import UserError


def launched_rank() -> int:
    """This process's global rank, as its launcher set it (srun, torchrun, Lightning's)."""
    for name in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


class RefuseOnRank(Callback):
    """Refuses on ``rank`` only: when the callbacks are built (``when="build"``, before the
    processes meet) or when training sets up (``"setup"``, after they met)."""

    def __init__(self, rank: int = 1, when: str = "build") -> None:
        self.rank, self.when = rank, when
        if when == "build" and launched_rank() == rank:
            raise UserError(f"rank {rank} refuses, as asked (before the processes meet).")

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.when == "setup" and trainer.global_rank == self.rank:
            raise UserError(f"rank {self.rank} refuses, as asked (after the processes met).")
