"""A classifier whose `OneCycleLR` is sized as the Lightning docs size it, in
`configure_optimizers` from `self.trainer.estimated_stepping_batches`, and stepped every
batch (AdamW: the cycle moves its betas too)."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy


class OneCycleClassifier(L.LightningModule):
    def __init__(self, num_features: int = 8, num_classes: int = 3, max_lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, num_classes))
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_acc(logits, y)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", self.val_acc)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc(self(x), y)
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.max_lr)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=self.hparams.max_lr,
            total_steps=self.trainer.estimated_stepping_batches,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


class OneCycleData(L.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(5)
        x = torch.randn(111, 8, generator=g)
        y = (x @ torch.randn(8, 3, generator=g)).argmax(1)
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
