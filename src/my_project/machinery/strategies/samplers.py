"""Exact evaluation under DDP: each sample of a val/test set is seen by exactly one rank.

Lightning gives val/test loaders a DistributedSampler, which pads the set with repeated
samples until it divides by the world size; metrics then count those duplicates (271 test
images on 2 ranks are scored as 272). An unpadded sampler leaves the last batches of some
ranks one sample short instead, which is safe for evaluation: DDP synchronises buffers only
on the first evaluation batch, and torchmetrics sums the states of all ranks at the end.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from torch.utils.data import Sampler


def evaluation_sampler(dataset: Sized, trainer: Any) -> Sampler | None:
    """A sampler for a val/test loader that splits ``dataset`` across ranks without padding.

    None (let Lightning decide) outside a Trainer, in one process, or when the set is smaller
    than the number of ranks (every rank must run at least one batch).
    """
    world_size = getattr(trainer, "world_size", 1) if trainer is not None else 1
    if world_size <= 1 or len(dataset) < world_size:
        return None
    return UnrepeatedDistributedSampler(
        dataset, num_replicas=world_size, rank=trainer.global_rank, shuffle=False
    )
