"""Layers created in `configure_model` (the docs' hook for models built on the device, or
sharded), not in `__init__`, sized by what the data module found in its data
(`self.trainer.datamodule`)."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class LateBuiltClassifier(L.LightningModule):
    def __init__(self, num_classes: int = 3, hidden: int = 16, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = None
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def configure_model(self):
        if self.net is not None:
            return
        num_features = self.trainer.datamodule.num_features
        hp = self.hparams
        self.net = nn.Sequential(
            nn.Linear(num_features, hp.hidden), nn.ReLU(), nn.Linear(hp.hidden, hp.num_classes)
        )

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

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc(self(x), y)
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class LateBuiltData(L.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.num_features = None  # known once the data is read

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(11)
        x = torch.randn(111, 8, generator=g)
        y = (x @ torch.randn(8, 3, generator=g)).argmax(1)
        self.num_features = x.shape[1]
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
