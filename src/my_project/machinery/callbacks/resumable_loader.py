"""`ResumableTrainLoader`: any data module's training loader resumes mid-epoch exactly.

A plain ``DataLoader(dataset, shuffle=True)`` has no state for a checkpoint: a run resumed
from a mid-epoch checkpoint restarts the epoch from its first batch in a new order (Lightning
warns, and trains on some samples twice and others not at all). This callback wraps the data
module's ``train_dataloader`` for the time of a fit, so that a plain ``DataLoader`` it returns
becomes a `ResumableDataLoader` over the same data set, batch size, collate function and
workers: its order of epoch ``e`` is a function of ``(seed, e)`` and its position in the epoch
is saved in every checkpoint (`data/resumable.py`). Loaders that are not plain DataLoaders
(a subclass, an iterable, an already resumable one) are left as they are; one that cannot
resume exactly by itself (no ``state_dict``) is named once, when training starts, with what to
change.
"""

from __future__ import annotations

import functools
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.data import _get_dataloader_init_args_and_kwargs
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from ..data.resumable import EpochSequentialSampler, EpochShuffleSampler, ResumableDataLoader

_WRAPPED = "_resumable_train_loader"


class ResumableTrainLoader(Callback):
    """``seed``: of the epochs' order (``null``: one is drawn and kept in the checkpoints)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._warned = False

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        datamodule = getattr(trainer, "datamodule", None)  # set by Lightning when fit starts
        if stage != "fit" or datamodule is None:
            return
        hook = datamodule.train_dataloader
        if getattr(hook, _WRAPPED, False):
            return

        @functools.wraps(hook)
        def train_dataloader() -> Any:
            loader = resumable(hook(), self.seed)
            reason = not_resumable(loader)
            if reason and not self._warned:
                self._warned = True
                rank_zero_warn(
                    f"The training loader cannot resume mid-epoch exactly ({reason}): a run "
                    "resumed from a mid-epoch checkpoint restarts that epoch's data order. "
                    "Return a plain `DataLoader(dataset, shuffle=True)` over a map-style data "
                    "set (the template makes it resumable), or a loader with `state_dict()` and "
                    "`load_state_dict()` (e.g. torchdata's `StatefulDataLoader`).",
                    category=UserWarning,
                )
            return loader

        setattr(train_dataloader, _WRAPPED, True)
        datamodule.train_dataloader = train_dataloader

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is not None and getattr(
            vars(datamodule).get("train_dataloader"), _WRAPPED, False
        ):
            del datamodule.train_dataloader


def resumable(loader: Any, seed: int | None) -> Any:
    """``loader`` as a `ResumableDataLoader`, when it is a plain DataLoader that samples its
    map-style data set in order or shuffled (each sample once an epoch); else ``loader``."""
    if type(loader) is not DataLoader or type(loader.batch_sampler) is not BatchSampler:
        return loader
    sampler = loader.sampler
    if isinstance(sampler, RandomSampler) and not sampler.replacement:
        if sampler.num_samples != len(loader.dataset):  # type: ignore[arg-type]
            return loader
        sampler = EpochShuffleSampler(loader.dataset, seed=seed)  # type: ignore[arg-type]
    elif type(sampler) is SequentialSampler:
        sampler = EpochSequentialSampler(loader.dataset, seed=seed)  # type: ignore[arg-type]
    else:
        return loader
    args, kwargs = _get_dataloader_init_args_and_kwargs(loader, sampler, RunningStage.TRAINING)
    return ResumableDataLoader(*args, **kwargs)


def not_resumable(loader: Any) -> str | None:
    """Why ``loader`` (as `resumable` left it) cannot continue mid-epoch where it stopped;
    None when it can (it has ``state_dict``/``load_state_dict``, as Lightning asks)."""
    if callable(getattr(loader, "state_dict", None)) and callable(
        getattr(loader, "load_state_dict", None)
    ):
        return None
    if isinstance(loader, (list, tuple, dict)):
        return f"several loaders (a {type(loader).__name__})"
    if not isinstance(loader, DataLoader):
        return f"a {type(loader).__name__}, not a DataLoader, without state_dict()"
    if type(loader) is not DataLoader:
        return f"a subclass of DataLoader, {type(loader).__name__}"
    if isinstance(loader.dataset, IterableDataset) or loader.batch_sampler is None:
        return f"its data set, a {type(loader.dataset).__name__}, is iterable"
    if type(loader.batch_sampler) is not BatchSampler:
        return f"its batch sampler is a {type(loader.batch_sampler).__name__}"
    return f"its sampler is a {type(loader.sampler).__name__}"
