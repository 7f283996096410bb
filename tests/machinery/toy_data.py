"""A data module on the template's `InMemoryDataModule` base, for the tests of that base
(whole-batch indexing, mid-epoch resume): points labelled by a fixed random
linear map, as in docs_style.py, held as tensors."""

from __future__ import annotations

from typing import Any

import torch

from my_project.machinery.data.in_memory import InMemoryDataModule, Split
from my_project.machinery.errors import UserError


class ToyInMemoryData(InMemoryDataModule):
    def __init__(
        self,
        num_features: int = 16,
        num_classes: int = 4,
        num_samples: int = 729,
        batch_size: int = 32,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 12345,
        num_workers: int = 0,
        pin_memory: bool | None = None,
        persistent_workers: bool = False,
        shuffle_seed: int | None = None,
    ) -> None:
        if num_samples < 1:  # a data module's own refusal of a value
            raise UserError(f"data.num_samples={num_samples}: expected a count of 1 or more.")
        super().__init__(
            batch_size=batch_size,
            val_fraction=val_fraction,
            test_fraction=test_fraction,
            split_seed=split_seed,
            num_workers=num_workers,
            pin_memory=pin_memory,
            persistent_workers=persistent_workers,
            shuffle_seed=shuffle_seed,
        )
        self.num_features, self.num_classes = num_features, num_classes

    def load(self) -> tuple[Split, Split | None]:
        generator = torch.Generator().manual_seed(0)
        n = self.hparams["num_samples"]
        x = torch.randn(n, self.num_features, generator=generator)
        weights = torch.randn(self.num_features, self.num_classes, generator=generator)
        return (x, (x @ weights).argmax(dim=1)), None

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_features": self.num_features, "num_classes": self.num_classes}
