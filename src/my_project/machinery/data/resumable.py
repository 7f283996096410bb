"""A training loader that can stop anywhere in an epoch and go on with the very next batch.

Lightning checkpoints the ``state_dict()`` of a training loader that has one and hands it back
through ``load_state_dict()``. A plain ``DataLoader`` has neither, and its order comes from the
global RNG. Here the order of epoch ``e`` is a function of ``(seed, e)``, and a resumed epoch
starts at the first batch not trained on (torchdata's ``StatefulDataLoader`` counts the batches
its iterator yielded, not those the loop took).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler


class _Epochs:
    """A sampler that knows its epoch (Lightning calls ``set_epoch``) and a seed (else one is
    drawn, kept in the checkpoints), and can start part-way (``start``: an index into the order)."""

    def __init__(self, data_source: Sized, seed: int | None = None) -> None:
        super().__init__(data_source)  # type: ignore[call-arg]
        self.seed = int(seed) if seed is not None else secrets.randbits(62)
        self.epoch = self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self) -> torch.Tensor:
        return torch.arange(len(self.data_source))  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[int]:
        start, self.start = self.start, 0
        yield from self.order()[start:].tolist()


class EpochShuffleSampler(_Epochs, RandomSampler):
    """A ``RandomSampler`` on purpose: under DDP Lightning replaces it by its
    ``DistributedSampler(shuffle=True)``, as it does for ``shuffle=True``."""

    def order(self) -> torch.Tensor:
        generator = torch.Generator().manual_seed(epoch_seed(self))
        return torch.randperm(len(self.data_source), generator=generator)


class EpochSequentialSampler(_Epochs, SequentialSampler):
    """In order, knowing its epoch: the loader's worker seeds follow ``(seed, epoch)`` too."""


def epoch_seed(sampler: Any) -> int:
    """A seed for the epoch of a sampler with a ``seed`` (ours, Lightning's DistributedSampler)."""
    seed, epoch = int(getattr(sampler, "seed", 0) or 0), int(getattr(sampler, "epoch", 0) or 0)
    return (seed * 1_000_003 + epoch) % (2**63)


class ResumableDataLoader(DataLoader):
    """A ``DataLoader`` whose place in the epoch (epoch, batches the loop took, sampler seed) is
    in every checkpoint; on resume the batches before it are skipped (loaded and dropped from
    a sampler not ours). Its own ``generator``, seeded from ``(seed, epoch)`` each epoch, gives
    the workers' base seed: drawn from the global RNG, it would shift what the steps draw."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generator = self.generator or torch.Generator()
        self.epoch: int | None = None
        self.batches = 0
        self._resume: tuple[int | None, int] | None = None

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return self._iterate()  # a generator: runs at the first batch, after `set_epoch`

    def _iterate(self) -> Iterator[Any]:
        self.epoch, self.batches = getattr(self.sampler, "epoch", None), 0
        if self._resume is not None:
            (epoch, batches), self._resume = self._resume, None
            if epoch == self.epoch and batches < len(self):  # else: the epoch had ended
                self.batches = batches
        self.generator.manual_seed(epoch_seed(self.sampler))
        skip = self.batches
        if isinstance(self.sampler, _Epochs):
            self.sampler.start, skip = skip * (self.batch_size or 1), 0
        for batch in itertools.islice(super().__iter__(), skip, None):
            self.batches += 1
            yield batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batches": self.batches,
            "seed": getattr(self.sampler, "seed", None),
            "batch_size": self.batch_size,  # what `batches` counts (a resume refuses another)
        }

    @property
    def restored(self) -> bool:
        """Whether it was given a state or has begun an epoch."""
        return self._resume is not None or self.epoch is not None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(self.sampler, _Epochs) and state.get("seed") is not None:
            self.sampler.seed = int(state["seed"])
        self._resume = (state.get("epoch"), int(state.get("batches", 0)))
