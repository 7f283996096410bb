"""A regressor with a torchmetrics `Metric` of its own (float `sum` states), its losses logged
with `self.log(..., sync_dist=True)`, and one value logged without `sync_dist`."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import Metric


class MeanAbsoluteError(Metric):
    """The docs' example of a metric of one's own: running sums, reduced by `sum`."""

    def __init__(self) -> None:
        super().__init__()
        self.add_state("sum_abs_error", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds, target):
        self.sum_abs_error += (preds - target).abs().sum()
        self.total += target.numel()

    def compute(self):
        return self.sum_abs_error / self.total


class SyncedRegressor(L.LightningModule):
    def __init__(self, num_features: int = 8, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(num_features, 16), nn.Tanh(), nn.Linear(16, 1))
        self.val_mae = MeanAbsoluteError()
        self.test_mae = MeanAbsoluteError()

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        predicted = self(x)
        self.val_mae(predicted, y)
        self.log("val_loss", F.mse_loss(predicted, y), sync_dist=True)
        self.log("val_mae", self.val_mae)

    def test_step(self, batch, batch_idx):
        x, y = batch
        predicted = self(x)
        loss = F.mse_loss(predicted, y)
        self.test_mae(predicted, y)
        self.log("test_loss", loss, sync_dist=True)
        self.log("test_loss_unsynced", loss)  # no sync_dist: as the Lightning docs write it
        self.log("test_mae", self.test_mae)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class SyncedData(L.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(9)
        x = torch.randn(111, 8, generator=g)
        y = torch.sin(x @ torch.randn(8, generator=g)) * 3.7
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
