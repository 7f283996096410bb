"""Fast batches of in-memory tensors: whole batches by indexing, never sample by sample.

A ``DataLoader`` over a ``TensorDataset`` fetches each sample of a batch on its own and
stacks them again in ``default_collate``; on small models that costs more than the training
step. Here a batch is one indexing operation per tensor, on the host (`TensorBatchDataset`,
still inside a standard ``DataLoader`` so Lightning can inject its ``DistributedSampler``) or
on the accelerator itself (`DeviceBatches`, for ``data.on_device=true``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sized
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, TensorDataset


class TensorBatchDataset(TensorDataset):
    """A ``TensorDataset`` that also hands out a whole batch in one indexing operation.

    ``DataLoader`` calls ``__getitems__`` with the batch sampler's list of indices (a
    documented hook of ``torch.utils.data``); pair it with ``collate_fn=keep_batch``.
    """

    def __getitems__(self, indices: list[int]) -> tuple[Tensor, ...]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return tuple(tensor.index_select(0, index) for tensor in self.tensors)


def keep_batch(batch: Any) -> Any:
    """The ``collate_fn`` for `TensorBatchDataset`: its batches are already stacked."""
    return batch


class DeviceBatches:
    """The batches a ``DataLoader`` would give, sliced from tensors already on the accelerator.

    For ``data.on_device=true``: no DataLoader, no worker, no host-to-device copy per step.
    Each epoch turns the loader's sampler order into one index tensor on the device, and each
    batch is one indexing operation on the resident tensors. Random numbers are drawn exactly
    as the DataLoader's iterator would draw them, so results do not depend on the switch.

    Lightning passes this iterable through untouched (it only re-samples DataLoaders), so
    under DDP `from_loader` shards it the way Lightning would shard the loader.
    """

    def __init__(
        self,
        tensors: tuple[Tensor, ...],
        batch_size: int,
        sampler: Iterable[int],
        drop_last: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        if not isinstance(sampler, Sized):
            raise TypeError("DeviceBatches needs a sampler with a length.")
        self.tensors = tensors
        self.batch_size = batch_size
        self.sampler = sampler  # Lightning calls its `set_epoch`, if any, every epoch
        self.batch_sampler = None  # Lightning reads both where it finds a `sampler`
        self.drop_last = drop_last
        self.generator = generator

    @classmethod
    def from_loader(
        cls,
        loader: DataLoader,
        tensors: tuple[Tensor, ...],
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
    ) -> DeviceBatches:
        """``loader``'s batches (its sampler, batch size, generator) from ``tensors``.

        Under DDP (``world_size > 1``) a shuffling sampler becomes the ``DistributedSampler``
        Lightning would inject (same ``seed``), and a sequential one gives each rank every
        ``world_size``-th sample: each sample is evaluated once, without padding duplicates.
        """
        sampler: Any = loader.sampler
        size = len(tensors[0])
        if world_size > 1 and not isinstance(sampler, DistributedSampler):
            if isinstance(sampler, RandomSampler):
                sampler = DistributedSampler(
                    range(size),  # type: ignore[arg-type]  # it only needs len()
                    num_replicas=world_size,
                    rank=rank,
                    shuffle=True,
                    seed=seed,
                )
            else:
                sampler = range(rank, size, world_size)
        batch_size = loader.batch_size or 1
        return cls(tensors, batch_size, sampler, loader.drop_last, loader.generator)

    def __len__(self) -> int:
        count = len(self.sampler)
        return count // self.batch_size if self.drop_last else math.ceil(count / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        return self._iterate(skip=0)

    def _iterate(self, skip: int) -> Iterator[tuple[Tensor, ...]]:
        """This epoch's batches, from batch number ``skip`` on (a resumed epoch)."""
        # torch.utils.data.dataloader._BaseDataLoaderIter.__init__ draws its base seed so;
        # drawing it here too keeps the random stream (shuffles, dropout) of both paths equal.
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        device = self.tensors[0].device
        # A sampler that has its order as a tensor (`EpochShuffleSampler.permutation`) saves
        # a round trip through a list of Python ints at every epoch start.
        permutation = getattr(self.sampler, "permutation", None)
        order = (
            permutation()
            if callable(permutation)
            else torch.as_tensor(list(self.sampler), dtype=torch.long)
        ).to(device, non_blocking=True)
        for start in range(skip * self.batch_size, len(self) * self.batch_size, self.batch_size):
            index = order[start : start + self.batch_size]
            yield tuple(tensor.index_select(0, index) for tensor in self.tensors)
