"""A classifier tested on two loaders (`test_dataloader` returns a list): Lightning logs each
test value once per loader, `test_acc/dataloader_idx_0` and `test_acc/dataloader_idx_1`. Its
`predict_step` unpacks `x, y = batch`, as a step written for the data's batches does."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class TwoTestClassifier(L.LightningModule):
    def __init__(self, num_features: int = 8, num_classes: int = 3, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, num_classes))
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = nn.ModuleList([MulticlassAccuracy(num_classes) for _ in range(2)])

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_acc(self(x), y)
        self.log("val_acc", self.val_acc)

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        logits = self(x)
        self.test_acc[dataloader_idx](logits, y)
        self.log("test_loss", F.cross_entropy(logits, y))
        self.log("test_acc", self.test_acc[dataloader_idx])

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        x, y = batch
        return torch.softmax(self(x), dim=1)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class TwoTestData(L.LightningDataModule):
    """Clean test points, and the same points with noise: two test loaders."""

    def __init__(self, num_features: int = 8, num_classes: int = 3, batch_size: int = 8) -> None:
        super().__init__()
        self.num_features, self.num_classes, self.batch_size = num_features, num_classes, batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(111, self.num_features, generator=g)
        y = (x @ torch.randn(self.num_features, self.num_classes, generator=g)).argmax(1)
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        noisy = x[88:] + 0.5 * torch.randn(23, self.num_features, generator=g)
        self.test_sets = [TensorDataset(x[88:], y[88:]), TensorDataset(noisy, y[88:])]

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return [DataLoader(s, batch_size=self.batch_size) for s in self.test_sets]
