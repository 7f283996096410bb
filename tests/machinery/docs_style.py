"""A team's own model and data, written as the Lightning docs write them.

Nothing here imports this project: the machinery's tests run against these two classes (and
the contract test copies this file into a folder of its own), so every guarantee of the
template is shown to hold for code that knows nothing about it. `LitClassifier` logs with
`self.log` on every step, keeps torchmetrics metrics as attributes and calls its network from
`forward`; `LitDataModule` returns plain DataLoaders over `TensorDataset`s.
"""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class LitClassifier(L.LightningModule):
    def __init__(
        self, num_features: int, num_classes: int, hidden: int = 32, lr: float = 0.01
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(num_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )
        self.train_acc = MulticlassAccuracy(num_classes)
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.train_acc(logits, y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("train_acc", self.train_acc, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_acc(logits, y)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", self.val_acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.test_acc(logits, y)
        self.log("test_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("test_acc", self.test_acc)
        self.log("test_error", (logits.argmax(dim=1) != y).float().mean())  # each process's

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class LitDataModule(L.LightningDataModule):
    """Points labelled by a fixed random linear map: learnable, and the same for every seed."""

    def __init__(
        self,
        num_features: int = 16,
        num_classes: int = 4,
        train_size: int = 512,
        val_size: int = 128,
        test_size: int = 89,
        batch_size: int = 32,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.num_features = num_features
        self.num_classes = num_classes
        self.batch_size = batch_size

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(0)
        sizes = (self.hparams.train_size, self.hparams.val_size, self.hparams.test_size)
        x = torch.randn(sum(sizes), self.num_features, generator=generator)
        weights = torch.randn(self.num_features, self.num_classes, generator=generator)
        y = (x @ weights).argmax(dim=1)
        self.train_set, self.val_set, self.test_set = (
            TensorDataset(xs, ys) for xs, ys in zip(x.split(sizes), y.split(sizes), strict=True)
        )

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
