"""A multi-label classifier as torchmetrics' docs write one: a logit per label,
`BCEWithLogitsLoss` against multi-hot float targets of shape (N, L), `MultilabelAccuracy`."""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MultilabelAccuracy


class MultiLabelClassifier(L.LightningModule):
    def __init__(self, num_features: int = 8, num_labels: int = 4, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, num_labels))
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.val_acc = MultilabelAccuracy(num_labels)
        self.test_acc = MultilabelAccuracy(num_labels)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_acc(logits, y.int())
        self.log("val_loss", self.loss_fn(logits, y))
        self.log("val_acc", self.val_acc)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc(self(x), y.int())
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class MultiLabelData(L.LightningDataModule):
    """Each label is on where its own direction of the features is positive."""

    def __init__(self, num_features: int = 8, num_labels: int = 4, batch_size: int = 8) -> None:
        super().__init__()
        self.num_features, self.num_labels = num_features, num_labels
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(5)
        x = torch.randn(111, self.num_features, generator=g)
        y = (x @ torch.randn(self.num_features, self.num_labels, generator=g) > 0).float()
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
