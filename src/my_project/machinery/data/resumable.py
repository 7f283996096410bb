"""A training loader that can stop anywhere in an epoch and continue with the very next batch.

Lightning saves the ``state_dict()`` of any train loader that has one in its checkpoints and
hands it back through ``load_state_dict()`` before iterating on resume. A plain ``DataLoader``
has neither, and its shuffled order comes from the global RNG at the moment an epoch starts, so
a resumed run replays the wrong batches. Here the order of epoch ``e`` is a function of
``(seed, e)`` alone, and a resumed epoch starts at the first batch that was not trained on.
(torchdata's ``StatefulDataLoader`` does this too, but counts batches its iterator yielded,
which is not what the training loop consumed; this is the small part we need, tested here.)
`ResumableDeviceBatches` is the same for ``data.on_device=true``, with the same state, so a
checkpoint resumes on either path.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from .batching import DeviceBatches

Batch = TypeVar("Batch")


class EpochShuffleSampler(RandomSampler):
    """Shuffles with a permutation seeded by ``(seed, epoch)``; can start part-way through.

    A ``RandomSampler`` subclass on purpose: under DDP Lightning replaces any ``RandomSampler``
    with its ``DistributedSampler(shuffle=True)``, exactly as it does for ``shuffle=True``.
    """

    def __init__(self, data_source: Sized, seed: int | None = None) -> None:
        super().__init__(data_source)
        # No seed (`seed=null`): pick one, and keep it in the checkpoint so a resume agrees.
        self.seed = int(seed) if seed is not None else secrets.randbits(62)
        self.epoch = 0
        self.start = 0  # index into this epoch's permutation where the next iteration starts

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls this at the start of every training epoch."""
        self.epoch = epoch

    def epoch_seed(self) -> int:
        return epoch_seed(self)

    def permutation(self) -> Tensor:
        """This epoch's order from ``start`` on, as a tensor (what ``__iter__`` yields)."""
        generator = torch.Generator().manual_seed(self.epoch_seed())
        order = torch.randperm(len(self.data_source), generator=generator)
        start, self.start = self.start, 0
        return order[start:]

    def __iter__(self) -> Iterator[int]:
        yield from self.permutation().tolist()

    def __len__(self) -> int:
        return len(self.data_source)


class EpochSequentialSampler(SequentialSampler):
    """In order, as ``SequentialSampler``, but knowing its epoch (Lightning calls
    ``set_epoch``), so the loader's worker seeds are a function of ``(seed, epoch)`` too. A
    ``SequentialSampler`` subclass: under DDP Lightning replaces it as it replaces that one."""

    def __init__(self, data_source: Sized, seed: int | None = None) -> None:
        super().__init__(data_source)
        self.seed = int(seed) if seed is not None else secrets.randbits(62)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


def epoch_seed(sampler: Any) -> int:
    """A seed for epoch ``sampler.epoch`` of a sampler with a ``seed`` (ours, and Lightning's
    ``DistributedSampler``); 0 and 0 for one without."""
    seed, epoch = int(getattr(sampler, "seed", 0) or 0), int(getattr(sampler, "epoch", 0) or 0)
    return (seed * 1_000_003 + epoch) % (2**63)


class EpochPosition:
    """How far the training loop got in the current epoch: saved in checkpoints, restored on
    resume. Shared by `ResumableDataLoader` and `ResumableDeviceBatches`, so their states are
    one format and a checkpoint resumes on either path."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.batches = 0
        self._resume: tuple[int | None, int] | None = None

    def start(self, sampler: Any, num_batches: int) -> int:
        """Begin the sampler's current epoch; return how many of its batches were already
        trained on (non-zero only for the epoch a checkpoint was taken in)."""
        epoch, skip = getattr(sampler, "epoch", None), 0
        if self._resume is not None:
            resume_epoch, resume_batches = self._resume
            self._resume = None
            # A checkpoint taken at the end of an epoch resumes at the start of the next one.
            if resume_epoch == epoch and resume_batches < num_batches:
                skip = resume_batches
        self.epoch, self.batches = epoch, skip
        return skip

    def count(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        """``batches``, counting each one the training loop takes."""
        for batch in batches:
            self.batches += 1
            yield batch

    def state_dict(self, sampler: Any) -> dict[str, Any]:
        state: dict[str, Any] = {"epoch": self.epoch, "batches": self.batches}
        if isinstance(sampler, (EpochShuffleSampler, EpochSequentialSampler)):
            state["seed"] = sampler.seed
        return state

    def load_state_dict(self, state: dict[str, Any], sampler: Any) -> None:
        seeded = (EpochShuffleSampler, EpochSequentialSampler)
        if isinstance(sampler, seeded) and state.get("seed") is not None:
            sampler.seed = int(state["seed"])
        self._resume = (state.get("epoch"), int(state.get("batches", 0)))


class ResumableDataLoader(DataLoader):
    """A ``DataLoader`` whose position in the epoch is saved in checkpoints.

    ``state_dict()`` records the epoch and how many batches of it the training loop took;
    ``load_state_dict()`` makes the next iteration of that same epoch skip them (in the
    sampler, so skipped batches are never loaded and never consume random numbers). The
    iterator is created lazily, at the first batch, after Lightning has called ``set_epoch``.

    Creating a DataLoader's iterator draws a base seed for its workers from the loader's
    ``generator``, or, without one (most code passes none), from the global torch RNG: on
    resume that draw comes after the RNG states were restored (`callbacks/rng_state.py`), and
    every random number the steps draw afterwards (dropout, noise) is shifted by one. So the
    loader always has a generator of its own, seeded from ``(seed, epoch)`` at each epoch:
    the global RNG is left alone, and worker seeds resume too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.generator is None:
            self.generator = torch.Generator()
        self._position = EpochPosition()

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return self._iterate()

    def _iterate(self) -> Iterator[Any]:
        skip = self._position.start(self.sampler, len(self))
        if self.generator is not None:  # worker seeds: a function of (seed, epoch) too
            self.generator.manual_seed(epoch_seed(self.sampler))
        if isinstance(self.sampler, EpochShuffleSampler):
            self.sampler.start = skip * (self.batch_size or 1)
            discard = 0
        else:
            discard = skip  # e.g. Lightning's DistributedSampler: skip by loading and dropping
        yield from self._position.count(itertools.islice(super().__iter__(), discard, None))

    def state_dict(self) -> dict[str, Any]:
        return self._position.state_dict(self.sampler)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._position.load_state_dict(state, self.sampler)


class ResumableDeviceBatches(DeviceBatches):
    """The training `DeviceBatches` of ``data.on_device=true``, resumable mid-epoch.

    Same state as `ResumableDataLoader` (`EpochPosition`): the order of epoch ``e`` comes from
    the same sampler, and a resumed epoch starts at the first batch that was not trained on.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._position = EpochPosition()

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        skip = self._position.start(self.sampler, len(self))
        yield from self._position.count(self._iterate(skip))

    def state_dict(self) -> dict[str, Any]:
        return self._position.state_dict(self.sampler)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._position.load_state_dict(state, self.sampler)
