"""Base data module for data sets small enough to hold as tensors in memory.

Subclasses only say how to load arrays; splitting, seeding and loaders live here once.
"""

from __future__ import annotations

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset

from ..strategies.samplers import evaluation_sampler
from .resumable import EpochShuffleSampler, ResumableDataLoader

Split = tuple[torch.Tensor, torch.Tensor]


class InMemoryDataModule(LightningDataModule):
    """Holds `train`, `val` and `test` splits as (images, labels) tensors.

    Subclasses implement :meth:`load`, returning a pool to split into train/val and, where
    the data set has an official test split, that split (else the test split is carved
    from the pool too). Splits are a deterministic function of ``split_seed``; the training
    order of each epoch is one of ``shuffle_seed`` and the epoch, and survives a resume.
    """

    num_classes: int = 10
    image_shape: tuple[int, int, int] = (1, 8, 8)

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 12345,
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
        shuffle_seed: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.splits: dict[str, Split] = {}

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

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        images, labels = self.splits[split]
        dataset = TensorDataset(images, labels)
        workers = self.hparams.num_workers
        options = dict(
            batch_size=self.hparams.batch_size,
            num_workers=workers,
            pin_memory=self.hparams.pin_memory,
            persistent_workers=self.hparams.persistent_workers and workers > 0,
            # Its own generator: starting an iterator then never draws from the global RNG
            # that dropout uses (with persistent workers the number of draws depends on the
            # loader's history, so a resumed run would draw differently).
            generator=torch.Generator().manual_seed(0),
        )
        if not shuffle:
            # Under DDP, val/test samples are split across ranks without padded duplicates.
            return DataLoader(dataset, sampler=evaluation_sampler(dataset, self.trainer), **options)
        sampler = EpochShuffleSampler(dataset, seed=self.hparams.shuffle_seed)
        return ResumableDataLoader(dataset, sampler=sampler, **options)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
