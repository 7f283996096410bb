"""Random images of any shape: benchmarks and smoke tests at real sizes, without a download."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..machinery.data.in_memory import InMemoryDataModule, Split


class SyntheticDataModule(InMemoryDataModule):
    """Uniform noise images labelled by a fixed random linear map: a learnable stand-in.

    The data is a deterministic function of ``seed``, so runs are comparable; a test split
    is carved from the same pool.
    """

    def __init__(
        self,
        num_samples: int = 6000,
        image_shape: Sequence[int] = (1, 28, 28),
        num_classes: int = 10,
        seed: int = 0,
        batch_size: int = 128,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        split_seed: int = 12345,
        num_workers: int = 0,
        pin_memory: bool | None = None,
        persistent_workers: bool = False,
        shuffle_seed: int | None = None,
    ) -> None:
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
        self.image_shape = tuple(image_shape)
        self.num_classes = num_classes

    def model_kwargs(self) -> dict[str, Any]:
        """What the model takes from this data (README, "Bring your own model and data")."""
        return {"num_classes": self.num_classes, "in_shape": self.image_shape}

    def load(self) -> tuple[Split, Split | None]:
        generator = torch.Generator().manual_seed(self.hparams["seed"])
        images = torch.rand(self.hparams["num_samples"], *self.image_shape, generator=generator)
        projection = torch.randn(math.prod(self.image_shape), self.num_classes, generator=generator)
        labels = ((images.flatten(1) - 0.5) @ projection).argmax(dim=1)
        return (images, labels), None
