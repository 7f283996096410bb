"""Exact evaluation under DDP: each sample of a val/test set is seen by exactly one process.

Lightning gives evaluation loaders a ``DistributedSampler``, which pads the set with repeated
samples until it divides by the world size, and metrics count them (89 test samples on 2
processes are scored as 90). Unpadded, some processes' last batch is one sample short, which
evaluation allows: torchmetrics sums every process's states, ``self.log(..., sync_dist=True)``
weighs each process's mean by its samples (`ddp.HydraDDPStrategy.reduce`). Map-style data sets
only: an iterable one is sharded by its own code.
"""

from __future__ import annotations

from collections.abc import Sized

from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from torch.utils.data import DataLoader, DistributedSampler

from .. import lightning_compat as compat


def unpadded(dataloader: object) -> object:
    """``dataloader`` with Lightning's padding sampler replaced by one that splits the set
    across processes without repeats; anything else (a sampler of the user's own, an iterable
    set, a set smaller than the number of processes) as it is."""
    sampler = getattr(dataloader, "sampler", None)
    if not isinstance(dataloader, DataLoader) or type(sampler) is not DistributedSampler:
        return dataloader
    dataset = dataloader.dataset
    # Every process needs a batch: a set smaller than their number keeps Lightning's repeats.
    if not isinstance(dataset, Sized) or len(dataset) < sampler.num_replicas:
        return dataloader
    if sampler.shuffle or sampler.drop_last:
        return dataloader
    exact = UnrepeatedDistributedSampler(
        dataset, num_replicas=sampler.num_replicas, rank=sampler.rank, shuffle=False
    )
    return compat.update_dataloader(dataloader, exact)
