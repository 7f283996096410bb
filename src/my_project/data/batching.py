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

import torch
from torch import Tensor
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler, TensorDataset


class TensorBatchDataset(TensorDataset):
    """A ``TensorDataset`` that also hands out a whole batch in one indexing operation.

    ``DataLoader`` calls ``__getitems__`` with the batch sampler's list of indices (a
    documented hook of ``torch.utils.data``); pair it with ``collate_fn=keep_batch``.
    """

    def __getitems__(self, indices: list[int]) -> tuple[Tensor, ...]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return tuple(tensor[index] for tensor in self.tensors)


def keep_batch(batch: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The ``collate_fn`` for `TensorBatchDataset`: its batches are already stacked."""
    return batch


def _advance_global_rng_like_a_dataloader() -> None:
    # Every DataLoader iterator draws its base seed from the global generator
    # (torch.utils.data.dataloader._BaseDataLoaderIter.__init__). Drawing it here too keeps
    # the random stream (shuffles, dropout) of `data.on_device=true` identical to the
    # DataLoader path, so the switch changes speed, not results.
    torch.empty((), dtype=torch.int64).random_()


class DeviceBatches:
    """Batches sliced from tensors that already live on the accelerator (``data.on_device``).

    No DataLoader, no worker, no host-to-device copy per step: each epoch builds one index
    tensor on the device (the order of ``sampler``, a standard sampler) and each batch is an
    index into the resident tensors. Lightning passes this iterable through untouched, so it
    shards for DDP itself: ``sampler`` is then a ``DistributedSampler`` (training, on which
    Lightning calls ``set_epoch``) or one rank's share of an evaluation split, without the
    padding duplicates a ``DistributedSampler`` adds.
    """

    def __init__(
        self, tensors: tuple[Tensor, ...], batch_size: int, sampler: Iterable[int]
    ) -> None:
        if not isinstance(sampler, Sized):
            raise TypeError("DeviceBatches needs a sampler with a length.")
        self.tensors = tensors
        self.batch_size = batch_size
        self.sampler = sampler
        self.batch_sampler = None  # Lightning reads both where it finds a `sampler`

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        _advance_global_rng_like_a_dataloader()
        device = self.tensors[0].device
        order = torch.as_tensor(list(self.sampler), dtype=torch.long).to(device, non_blocking=True)
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            yield tuple(tensor[index] for tensor in self.tensors)


def device_sampler(
    size: int, shuffle: bool, rank: int = 0, world_size: int = 1, seed: int = 0
) -> Iterable[int]:
    """The sample order of `DeviceBatches` for one process: what the DataLoader path would use.

    One process: ``RandomSampler``/``SequentialSampler`` as a ``DataLoader`` builds them. Under
    DDP, training uses the ``DistributedSampler`` Lightning would inject (same seed), and
    evaluation gives each rank every ``world_size``-th sample, so each sample counts once.
    """
    if world_size == 1:
        source = range(size)
        return RandomSampler(source) if shuffle else SequentialSampler(source)
    if shuffle:
        return DistributedSampler(
            range(size), num_replicas=world_size, rank=rank, shuffle=True, seed=seed
        )
    return range(rank, size, world_size)
