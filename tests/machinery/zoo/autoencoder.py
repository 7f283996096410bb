"""An unsupervised module (an autoencoder) on bare-tensor batches: no targets anywhere."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader


class AutoEncoder(L.LightningModule):
    def __init__(self, num_features: int = 8, code: int = 3, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, code))
        self.decoder = nn.Sequential(nn.Linear(code, 16), nn.ReLU(), nn.Linear(16, num_features))

    def forward(self, x):
        return self.decoder(self.encoder(x))

    def training_step(self, batch, batch_idx):
        loss = F.mse_loss(self(batch), batch)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", F.mse_loss(self(batch), batch))

    def test_step(self, batch, batch_idx):
        self.log("test_loss", F.mse_loss(self(batch), batch))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class PointsData(L.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(5)
        points = torch.randn(111, 3, generator=g) @ torch.randn(3, 8, generator=g)
        self.train_set, self.val_set, self.test_set = points[:64], points[64:88], points[88:]

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
