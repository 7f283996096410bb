"""scikit-learn's bundled digits: 1797 real 8x8 images of 10 classes, no network needed."""

from __future__ import annotations

from typing import Any

import torch

from ..machinery.data.in_memory import InMemoryDataModule, Split


class DigitsDataModule(InMemoryDataModule):
    """The default data: small enough to train to >95% test accuracy in seconds on a CPU."""

    def model_kwargs(self) -> dict[str, Any]:
        """What the model takes from this data (README, "Bring your own model and data")."""
        return {"num_classes": 10, "in_shape": (1, 8, 8)}

    def load(self) -> tuple[Split, Split | None]:
        from sklearn.datasets import load_digits  # heavy import: only when data is needed

        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        labels = torch.tensor(digits.target, dtype=torch.long)
        return (images, labels), None
