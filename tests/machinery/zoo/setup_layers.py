"""Layers sized by the data, built in `setup(stage)` as the Lightning docs' `setup` example
builds them (anew at every call), from what the data module found in its data."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class DataShapedClassifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage):
        data = self.trainer.datamodule
        self.body = nn.Sequential(nn.Linear(data.num_features, self.hparams.hidden), nn.ReLU())
        self.head = nn.Linear(self.hparams.hidden, data.num_classes)
        self.val_acc = MulticlassAccuracy(data.num_classes)
        self.test_acc = MulticlassAccuracy(data.num_classes)

    def forward(self, x):
        return self.head(self.body(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_acc(self(x), y)
        self.log("val_acc", self.val_acc)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc(self(x), y)
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class ShapesFromData(L.LightningDataModule):
    """Features and classes are what the data holds, known once `setup` has read it."""

    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(5)
        x = torch.randn(111, 6, generator=g)
        y = (x @ torch.randn(6, 3, generator=g)).argmax(1)
        self.num_features, self.num_classes = x.shape[1], int(y.max()) + 1
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
