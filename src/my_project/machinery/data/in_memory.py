"""Base data module for data sets small enough to hold as tensors in memory.

Subclasses only say how to load arrays; splitting, seeding and loaders live here once.
"""

from __future__ import annotations

import os

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, RandomSampler

from ..errors import UserError
from .batching import DeviceBatches, TensorBatchDataset, keep_batch
from .resumable import EpochShuffleSampler, ResumableDataLoader, ResumableDeviceBatches

Split = tuple[torch.Tensor, torch.Tensor]


class InMemoryDataModule(LightningDataModule):
    """Holds `train`, `val` and `test` splits as (inputs, targets) tensors.

    Subclasses implement :meth:`load`, returning a pool to split into train/val and, where
    the data set has an official test split, that split (else the test split is carved
    from the pool too). Splits are a deterministic function of ``split_seed``; the training
    order of each epoch is one of ``shuffle_seed`` and the epoch, and survives a resume.

    Loaders hand out whole batches by indexing the split tensors (no per-sample collate):
    through a standard ``DataLoader`` (``on_device=False``), or sliced from copies of the
    splits that live on the accelerator (``on_device=True``, see `batching`). The default,
    ``"auto"``, slices in place when training on CPU without workers, where the splits
    already are: that skips the DataLoader's per-batch machinery and copies nothing. On an
    accelerator, giving it the whole data set is the user's call. ``pin_memory=None`` pins
    host batches when training on CUDA, so Lightning's ``non_blocking`` copies overlap.
    """

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 12345,
        num_workers: int = 0,
        pin_memory: bool | None = None,
        persistent_workers: bool = False,
        shuffle_seed: int | None = None,
        on_device: bool | str = "auto",
    ) -> None:
        super().__init__()
        if on_device not in (True, False, "auto"):
            raise UserError(
                f"data.on_device={on_device!r}: expected true (copy the data to the "
                "accelerator once and slice batches there), false (a DataLoader over host "
                "memory) or auto (true when training on CPU without workers, else false)."
            )
        self.save_hyperparameters(logger=False)
        self.splits: dict[str, Split] = {}
        self._resident: dict[tuple[str, torch.device], Split] = {}

    def load(self) -> tuple[Split, Split | None]:
        """Return ``(pool, test)``; ``test`` is None when it must be split from the pool."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        pool, test = self.load()
        generator = torch.Generator().manual_seed(self.hparams.split_seed)
        order = torch.randperm(len(pool[1]), generator=generator)
        n = len(order)
        n_test = 0 if test is not None else round(n * self.hparams.test_fraction)
        n_val = round(n * self.hparams.val_fraction)
        test_idx, val_idx, train_idx = (
            order[:n_test],
            order[n_test : n_test + n_val],
            order[n_test + n_val :],
        )
        self.splits = {
            "train": (pool[0][train_idx], pool[1][train_idx]),
            "val": (pool[0][val_idx], pool[1][val_idx]),
            "test": test if test is not None else (pool[0][test_idx], pool[1][test_idx]),
        }

    def _device(self) -> torch.device:
        """Where the model trains: the strategy's device once a Trainer is attached."""
        strategy = getattr(self.trainer, "strategy", None)
        return strategy.root_device if strategy is not None else torch.device("cpu")

    def slices_on_device(self) -> bool:
        """``on_device`` resolved: whether batches are sliced from device-resident splits."""
        if self.hparams.on_device == "auto":
            return self._device().type == "cpu" and self.hparams.num_workers == 0
        return bool(self.hparams.on_device)

    def _loader(self, split: str, shuffle: bool) -> DataLoader | DeviceBatches:
        dataset = TensorBatchDataset(*self.splits[split])
        workers = self.hparams.num_workers
        on_device = self.slices_on_device()
        pin_memory = self.hparams.pin_memory
        if pin_memory is None:
            pin_memory = self._device().type == "cuda" and not on_device
        options: dict = dict(
            batch_size=self.hparams.batch_size,
            collate_fn=keep_batch,
            num_workers=workers,
            pin_memory=pin_memory,
            persistent_workers=self.hparams.persistent_workers and workers > 0,
            # Its own generator: starting an iterator then never draws from the global RNG
            # that dropout uses (with persistent workers the number of draws depends on the
            # loader's history, so a resumed run would draw differently).
            generator=torch.Generator().manual_seed(0),
        )
        loader: DataLoader
        if shuffle:
            sampler = EpochShuffleSampler(dataset, seed=self.hparams.shuffle_seed)
            loader = ResumableDataLoader(dataset, sampler=sampler, **options)
        else:
            loader = DataLoader(dataset, shuffle=False, **options)
        if on_device:
            return self._device_batches(split, loader)
        return loader

    def _device_batches(self, split: str, loader: DataLoader) -> DeviceBatches:
        """``loader``'s batches from the split moved once to the device; sharded here under DDP."""
        device = self._device()
        if (split, device) not in self._resident:
            self._resident[split, device] = self._move(split, device)
        trainer = self.trainer
        if (
            trainer is not None
            and trainer.overfit_batches
            and isinstance(loader.sampler, RandomSampler)
        ):
            # What Lightning does to a DataLoader when overfitting: no shuffling.
            loader = DataLoader(loader.dataset, batch_size=loader.batch_size, collate_fn=keep_batch)
        rank, world_size = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        # PL_GLOBAL_SEED is the seed Lightning gives the DistributedSampler it injects.
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0))
        # The training loader resumes mid-epoch; so must its on-device replacement.
        kind = ResumableDeviceBatches if isinstance(loader, ResumableDataLoader) else DeviceBatches
        return kind.from_loader(loader, self._resident[split, device], rank, world_size, seed)

    def _move(self, split: str, device: torch.device) -> Split:
        images, labels = self.splits[split]
        try:
            return images.to(device), labels.to(device)
        except torch.OutOfMemoryError as error:
            size = (images.nbytes + labels.nbytes) / 2**30
            raise UserError(
                f"data.on_device=true: the {split} split ({size:.2f} GiB) does not fit in the "
                f"memory of {device}. Run with `data.on_device=false` to stream batches from host "
                "memory instead."
            ) from error

    def train_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("test", shuffle=False)
