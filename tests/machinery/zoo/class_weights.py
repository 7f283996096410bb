"""Class weights computed in `setup` from the training labels (imbalanced classes), kept as a
plain tensor attribute and moved to the model's device where they are used, as many teams
write it: correct on any device, though Lightning does not move the attribute."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class WeightedClassifier(L.LightningModule):
    def __init__(self, num_features: int = 8, num_classes: int = 3, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, num_classes))
        self.class_weights = torch.ones(num_classes)
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def setup(self, stage):
        if stage == "fit":
            labels = self.trainer.datamodule.train_set.tensors[1]
            counts = torch.bincount(labels, minlength=self.hparams.num_classes).float()
            self.class_weights = counts.sum() / (len(counts) * counts.clamp(min=1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y, weight=self.class_weights.to(self.device))
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


class ImbalancedData(L.LightningDataModule):
    """Three classes, the first about four times as frequent as the others."""

    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(111, 8, generator=g)
        y = (x @ torch.randn(8, 3, generator=g) + torch.tensor([1.5, 0.0, 0.0])).argmax(1)
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
