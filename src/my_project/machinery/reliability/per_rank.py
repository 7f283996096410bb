"""State that differs between the processes of a DDP run, gathered on every one of them."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def gather_from_ranks(value: T) -> list[T]:
    """``value`` of every process in rank order (``[value]`` alone): a collective every process
    must reach."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered
