"""A classifier validated on two loaders (`val_dataloader` returns a list): Lightning logs
each value once per loader, as `val_acc/dataloader_idx_0` and `val_acc/dataloader_idx_1`."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class TwoValClassifier(L.LightningModule):
    def __init__(self, num_features: int = 8, num_classes: int = 3, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, num_classes))
        self.val_acc = nn.ModuleList([MulticlassAccuracy(num_classes) for _ in range(2)])
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        logits = self(x)
        self.val_acc[dataloader_idx](logits, y)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", self.val_acc[dataloader_idx])

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.test_acc(logits, y)
        self.log("test_loss", F.cross_entropy(logits, y))
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class TwoValData(L.LightningDataModule):
    """Clean validation points, and the same points with noise: two loaders."""

    def __init__(self, num_features: int = 8, num_classes: int = 3, batch_size: int = 8) -> None:
        super().__init__()
        self.num_features, self.num_classes, self.batch_size = num_features, num_classes, batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(111, self.num_features, generator=g)
        y = (x @ torch.randn(self.num_features, self.num_classes, generator=g)).argmax(1)
        self.train_set = TensorDataset(x[:64], y[:64])
        noisy = x[64:88] + 0.5 * torch.randn(24, self.num_features, generator=g)
        self.val_sets = [TensorDataset(x[64:88], y[64:88]), TensorDataset(noisy, y[64:88])]
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return [DataLoader(s, batch_size=self.batch_size) for s in self.val_sets]

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
