"""Base data module for data sets small enough to hold as tensors in memory: subclasses only
say how to load arrays; splitting, seeding and loaders live here once."""

from __future__ import annotations

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from .batching import TensorBatchDataset, keep_batch
from .resumable import EpochShuffleSampler, ResumableDataLoader

Split = tuple[torch.Tensor, torch.Tensor]
SPLITS = ("test", "val", "train")  # the order they are cut from the shuffled pool


class InMemoryDataModule(LightningDataModule):
    """`train`, `val` and `test` splits as (inputs, targets) tensors, a function of
    ``split_seed``; the training order of epoch ``e`` one of ``(shuffle_seed, e)``, resumable
    mid-epoch (`resumable.py`); a batch one indexing operation per tensor (`batching.py`).
    ``pin_memory=None`` pins host batches when training on CUDA (``non_blocking`` copies)."""

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
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.splits: dict[str, Split] = {}

    def load(self) -> tuple[Split, Split | None]:
        """``(pool, test)``: the pool is split into train/val, and test too when ``test`` is None
        (a data set without an official test split)."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        pool, test = self.load()
        order = torch.randperm(
            len(pool[1]), generator=torch.Generator().manual_seed(self.hparams.split_seed)
        )
        n_test = 0 if test is not None else round(len(order) * self.hparams.test_fraction)
        n_val = round(len(order) * self.hparams.val_fraction)
        parts = order.split([n_test, n_val, len(order) - n_test - n_val])
        self.splits = {
            name: (pool[0][i], pool[1][i]) for name, i in zip(SPLITS, parts, strict=True)
        }
        if test is not None:
            self.splits["test"] = test

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        dataset = TensorBatchDataset(*self.splits[split])
        workers, pin_memory = self.hparams.num_workers, self.hparams.pin_memory
        if pin_memory is None:
            strategy = getattr(self.trainer, "strategy", None)
            pin_memory = strategy is not None and strategy.root_device.type == "cuda"
        options = dict(
            batch_size=self.hparams.batch_size,
            collate_fn=keep_batch,
            num_workers=workers,
            pin_memory=pin_memory,
            persistent_workers=self.hparams.persistent_workers and workers > 0,
            # Its own generator: making an iterator never draws from the global RNG that
            # dropout uses (how often it does depends on the workers' history).
            generator=torch.Generator().manual_seed(0),
        )
        if not shuffle:
            return DataLoader(dataset, **options)
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
