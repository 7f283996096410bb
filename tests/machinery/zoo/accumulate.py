"""Manual optimization with gradient accumulation, as the docs write it: `manual_backward`
on every batch, an optimizer step every `accumulate` batches, and a learning-rate scheduler
stepped by hand at the end of each epoch."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AccumulatingRegressor(L.LightningModule):
    def __init__(self, num_features: int = 8, accumulate: int = 2, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        optimizer = self.optimizers()
        loss = F.mse_loss(self(x), y)
        self.manual_backward(loss / self.hparams.accumulate)
        if (batch_idx + 1) % self.hparams.accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
        if self.trainer.is_last_batch:
            self.lr_schedulers().step()
        self.log("train_loss", loss, on_step=True, on_epoch=True)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)]


class AccumulateData(L.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(12)
        x = torch.randn(111, 8, generator=g)
        y = x @ torch.randn(8, generator=g)
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
