"""`PerRankCallbackStates`: every callback resumes with its own process's state under DDP.

Lightning writes a checkpoint from the process of rank 0, so each callback's ``state_dict``
in it is rank 0's, and every process gets rank 0's back on resume. Where the states differ
(a best-checkpoint or early-stopping callback whose monitored value was logged without
``sync_dist``, so each process compared its own values), the processes then decide otherwise
than they did before the stop: ModelCheckpoint saves only when every process agrees, so a
resumed run keeps another best checkpoint, and tests another model, than one that never
stopped. This callback saves every other callback's state of every process in the
checkpoint and gives each process its own back when training resumes. In one process it does
nothing.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from ..reliability.per_rank import gather_from_ranks, own_entry
from .epoch_state import PartialEpochState
from .rng_state import RNGStateCallback

# Callbacks that keep a state per process themselves.
_OWN_PER_RANK = (PartialEpochState, RNGStateCallback)


class PerRankCallbackStates(Callback):
    def __init__(self) -> None:
        self._pending: list[Any] | None = None

    def _others(self, trainer: Trainer) -> list[Callback]:
        callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
        return [cb for cb in callbacks if cb is not self and not isinstance(cb, _OWN_PER_RANK)]

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if trainer.world_size == 1:
            return
        states = {cb.state_key: cb.state_dict() for cb in self._others(trainer)}
        ranks = gather_from_ranks({key: state for key, state in states.items() if state})
        checkpoint.setdefault("callbacks", {})[self.state_key] = {"ranks": ranks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("ranks")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        ranks, self._pending = self._pending, None
        own = own_entry(ranks, trainer.global_rank, trainer.world_size) if ranks else None
        if not own:  # nothing saved, or another number of processes
            return
        for callback in self._others(trainer):
            if callback.state_key in own:
                callback.load_state_dict(own[callback.state_key])
