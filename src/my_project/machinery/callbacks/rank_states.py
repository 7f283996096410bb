"""Under DDP every callback resumes with its own process's state, not rank 0's.

A best-checkpoint or early-stopping callback whose monitored value was logged without
``sync_dist`` compares each process's own values; restored with rank 0's state, the processes
would decide otherwise than before the stop (ModelCheckpoint saves only when all agree), and a
resumed run would keep another best checkpoint than one that never stopped.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from ..reliability.per_rank import PerRankState


class PerRankCallbackStates(PerRankState):
    """Every other callback's ``state_dict`` of every process (those keeping their own per
    process excepted); nothing to do in one process."""

    def _others(self, trainer: Trainer) -> list[Callback]:
        callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
        return [cb for cb in callbacks if not isinstance(cb, PerRankState)]

    def collect(self, trainer: Trainer, pl_module: LightningModule) -> Any:
        if trainer.world_size == 1:
            return None
        return {cb.state_key: state for cb in self._others(trainer) if (state := cb.state_dict())}

    def restore(self, trainer: Trainer, pl_module: LightningModule, state: Any) -> None:
        for callback in self._others(trainer):
            if callback.state_key in state:
                callback.load_state_dict(state[callback.state_key])
