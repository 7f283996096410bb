"""A heteroscedastic regressor: `forward` returns a tuple, the predicted mean and the log of
the predicted variance, trained with `GaussianNLLLoss`; no `predict_step` of its own."""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MeanSquaredError


class HeteroscedasticRegressor(L.LightningModule):
    def __init__(self, num_features: int = 6, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Linear(num_features, 16), nn.Tanh())
        self.mean_head = nn.Linear(16, 1)
        self.log_var_head = nn.Linear(16, 1)
        self.loss_fn = nn.GaussianNLLLoss()
        self.val_mse = MeanSquaredError()
        self.test_mse = MeanSquaredError()

    def forward(self, x):
        features = self.body(x)
        return self.mean_head(features).squeeze(-1), self.log_var_head(features).squeeze(-1)

    def _loss(self, x, y):
        mean, log_var = self(x)
        return self.loss_fn(mean, y, log_var.exp()), mean

    def training_step(self, batch, batch_idx):
        loss, _ = self._loss(*batch)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, mean = self._loss(*batch)
        self.val_mse(mean, batch[1])
        self.log("val_loss", loss)
        self.log("val_mse", self.val_mse)

    def test_step(self, batch, batch_idx):
        loss, mean = self._loss(*batch)
        self.test_mse(mean, batch[1])
        self.log("test_loss", loss, sync_dist=True)
        self.log("test_mse", self.test_mse)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class NoisyLine(L.LightningDataModule):
    """y = x·w plus noise that grows with the first feature."""

    def __init__(self, num_features: int = 6, batch_size: int = 8) -> None:
        super().__init__()
        self.num_features, self.batch_size = num_features, batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(11)
        x = torch.randn(111, self.num_features, generator=g)
        noise = torch.randn(111, generator=g) * (0.1 + x[:, 0].abs())
        y = x @ torch.randn(self.num_features, generator=g) + noise
        self.train_set = TensorDataset(x[:64], y[:64])
        self.val_set = TensorDataset(x[64:88], y[64:88])
        self.test_set = TensorDataset(x[88:], y[88:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
