"""State that differs between the processes of a DDP run, kept for each of them.

Lightning writes a checkpoint from rank 0, so a callback's ``state_dict`` there is all a
resumed run gets, and every process restores rank 0's copy. `PerRankState` gathers every
process's own state into the checkpoint (``Trainer.save_checkpoint`` runs on all of them, so
the gather is a collective they all reach) and gives each its own back when training starts.
"""

from __future__ import annotations

from typing import Any, TypeVar

from lightning.pytorch import Callback, LightningModule, Trainer

T = TypeVar("T")


def gather_from_ranks(value: T) -> list[T]:
    """``value`` of every process in rank order (``[value]`` alone); tensors on the CPU."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


class PerRankState(Callback):
    """A callback whose checkpointed state is each process's own: `collect` on every process
    when a checkpoint is written, `restore` with this process's entry when training starts
    (not when the number of processes changed, or for an entry of None)."""

    _pending: list[Any] | None = None

    def collect(self, trainer: Trainer, pl_module: LightningModule) -> Any:
        raise NotImplementedError

    def restore(self, trainer: Trainer, pl_module: LightningModule, state: Any) -> None:
        raise NotImplementedError

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        ranks = gather_from_ranks(self.collect(trainer, pl_module))
        checkpoint.setdefault("callbacks", {})[self.state_key] = {"ranks": ranks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("ranks")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        ranks, self._pending = self._pending, None
        if ranks and len(ranks) == trainer.world_size and ranks[trainer.global_rank] is not None:
            self.restore(trainer, pl_module, ranks[trainer.global_rank])
