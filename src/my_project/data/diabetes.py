"""scikit-learn's bundled diabetes data: a tabular regression, no network needed.

442 patients, 10 measurements each (age, sex, body mass index, blood pressure, six blood
serum values) and the target, a measure of disease progression one year later (25 to 346).
The features are standardised with the training split's mean and spread, so no statistic of
the validation or test rows leaks into training; the model gets the target's mean and spread
of the training split too, to predict in the target's own units.
"""

from __future__ import annotations

from typing import Any

import torch

from ..machinery.data.in_memory import InMemoryDataModule, Split


class DiabetesDataModule(InMemoryDataModule):
    def load(self) -> tuple[Split, Split | None]:
        from sklearn.datasets import load_diabetes  # heavy import: only when data is needed

        data = load_diabetes(scaled=False)
        features = torch.tensor(data.data, dtype=torch.float32)
        targets = torch.tensor(data.target, dtype=torch.float32)
        return (features, targets), None

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        super().setup(stage)
        features = self.splits["train"][0]
        mean, std = features.mean(dim=0), features.std(dim=0)
        self.splits = {name: ((x - mean) / std, y) for name, (x, y) in self.splits.items()}

    def model_kwargs(self) -> dict[str, Any]:
        """What the model takes from this data (README, "Bring your own model and data")."""
        self.setup()
        targets = self.splits["train"][1]
        return {
            "in_shape": (self.splits["train"][0].shape[1],),
            "target_mean": float(targets.mean()),
            "target_std": float(targets.std()),
        }
