"""Any data module's training loader resumes mid-epoch exactly.

A plain ``DataLoader(shuffle=True)`` has no state a checkpoint could hold: a mid-epoch resume
would redo that epoch in a new order (some samples twice, some never). For the time of a fit, a plain ``DataLoader`` (in order or shuffled) that the data module's
``train_dataloader`` returns becomes a `ResumableDataLoader` over the same data set, batch size,
collate function and workers (`data/resumable.py`). Other loaders are left as they are
(Lightning warns when a run resumes mid-epoch with one that has no ``state_dict``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities import CombinedLoader
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from .. import lightning_compat as compat
from ..data.resumable import EpochSequentialSampler, EpochShuffleSampler, ResumableDataLoader

_WRAPS = "_resumable_loader_wraps"


class ResumableTrainLoader(Callback):
    """``seed``: of the epochs' order (``null``: one is drawn and kept in the checkpoints)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._states: list[Any] = []

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        fit_loop = checkpoint.get("loops", {}).get("fit_loop", {})
        self._states = fit_loop.get("state_dict", {}).get("combined_loader", [])

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """The checkpoint's loader states, where Lightning did not hand them over: not when
        `configure_optimizers` read ``trainer.estimated_stepping_batches`` (the OneCycleLR
        recipe; Lightning-AI/pytorch-lightning#20550)."""
        states, self._states = self._states, []
        loaders = CombinedLoader(trainer.train_dataloader).flattened if states else []
        stateful = [dl for dl in loaders if hasattr(dl, "load_state_dict")]  # Lightning's order
        for loader, state in zip(stateful, states, strict=False):
            if isinstance(loader, ResumableDataLoader) and not loader.restored:
                loader.load_state_dict(state)

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        if stage != "fit" or datamodule is None or hasattr(datamodule.train_dataloader, _WRAPS):
            return
        hook = datamodule.train_dataloader

        @functools.wraps(hook)
        def train_dataloader() -> Any:
            return resumable(hook(), self.seed)

        setattr(train_dataloader, _WRAPS, hook)
        datamodule.train_dataloader = train_dataloader

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        hook = getattr(vars(datamodule or object).get("train_dataloader"), _WRAPS, None)
        if hook is not None:  # the data module's own hook back, as it was
            del datamodule.train_dataloader
            if not inspect.ismethod(hook):
                datamodule.train_dataloader = hook


def resumable(loader: Any, seed: int | None) -> Any:
    """``loader`` as a `ResumableDataLoader` when it is a plain DataLoader that samples its
    map-style data set in order or shuffled (each sample once an epoch); else ``loader``."""
    if type(loader) is not DataLoader or type(loader.batch_sampler) is not BatchSampler:
        return loader
    sampler, dataset = loader.sampler, loader.dataset
    if isinstance(sampler, RandomSampler) and not sampler.replacement:
        if sampler.num_samples != len(dataset):  # type: ignore[arg-type]
            return loader
        sampler = EpochShuffleSampler(dataset, seed=seed)  # type: ignore[arg-type]
    elif type(sampler) is SequentialSampler:
        sampler = EpochSequentialSampler(dataset, seed=seed)  # type: ignore[arg-type]
    else:
        return loader
    args, kwargs = compat.loader_args(loader, sampler, RunningStage.TRAINING)
    return ResumableDataLoader(*args, **kwargs)
