"""A GAN as Lightning's docs write one: manual optimization with two optimizers
(`self.automatic_optimization = False`, `toggle_optimizer`, `manual_backward`), the losses
logged per step with `self.log_dict`, bare-tensor batches of real points."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader


class GAN(L.LightningModule):
    def __init__(self, latent_dim: int = 4, lr: float = 0.002) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = nn.Sequential(nn.Linear(latent_dim, 16), nn.ReLU(), nn.Linear(16, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, z):
        return self.generator(z)

    def adversarial_loss(self, logits, is_real: bool):
        target = torch.ones_like(logits) if is_real else torch.zeros_like(logits)
        return F.binary_cross_entropy_with_logits(logits, target)

    def training_step(self, batch):
        real = batch
        optimizer_g, optimizer_d = self.optimizers()
        z = torch.randn(real.shape[0], self.hparams.latent_dim).type_as(real)

        self.toggle_optimizer(optimizer_g)
        g_loss = self.adversarial_loss(self.discriminator(self(z)), True)
        self.manual_backward(g_loss)
        optimizer_g.step()
        optimizer_g.zero_grad()
        self.untoggle_optimizer(optimizer_g)

        self.toggle_optimizer(optimizer_d)
        fake = self(z).detach()
        d_loss = (
            self.adversarial_loss(self.discriminator(real), True)
            + self.adversarial_loss(self.discriminator(fake), False)
        ) / 2
        self.manual_backward(d_loss)
        optimizer_d.step()
        optimizer_d.zero_grad()
        self.untoggle_optimizer(optimizer_d)
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=True)

    def _distance(self, real):
        """How far generated points are from real ones (a mean over the batch)."""
        z = torch.randn(real.shape[0], self.hparams.latent_dim).type_as(real)
        return torch.cdist(self(z), real).min(dim=1).values.mean()

    def validation_step(self, batch, batch_idx):
        self.log("val_distance", self._distance(batch))

    def test_step(self, batch, batch_idx):
        self.log("test_distance", self._distance(batch))

    def configure_optimizers(self):
        lr = self.hparams.lr
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        return [opt_g, opt_d], []


class RingData(L.LightningDataModule):
    """Points on a ring; batches are bare tensors (a DataLoader over a tensor)."""

    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(2)
        angle = 2 * torch.pi * torch.rand(111, generator=g)
        points = torch.stack([angle.cos(), angle.sin()], dim=1)
        self.train_set, self.val_set, self.test_set = points[:64], points[64:88], points[88:]

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size)
