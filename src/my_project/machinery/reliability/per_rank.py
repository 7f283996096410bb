"""State that differs between the processes of a DDP run, kept for each of them.

Lightning writes a checkpoint from the process of rank 0: what a callback's ``state_dict``
returns there is all a resumed run gets, and every process then restores rank 0's copy. For
state that differs per process (random generators, metric states of the part of the data a
process saw), each process's own copy is gathered into the checkpoint and each gets its own
back. Every process computes the checkpoint (``Trainer.save_checkpoint`` runs on all of them),
so gathering there is one collective they all reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def gather_from_ranks(value: T) -> list[T]:
    """``value`` of every process, in rank order; ``[value]`` in a single process. Tensors in
    it should be on the CPU (they are pickled)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def own_entry(entries: Sequence[T], rank: int, world_size: int) -> T | None:
    """This process's entry of a gathered list; None when the run now has another number of
    processes than the one that saved it (no entry is this process's own)."""
    return entries[rank] if len(entries) == world_size else None
