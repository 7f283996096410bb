"""A module and data module written as lightning-hydra-template writes them (nothing imported
from this project), for the checkpoint tests: ``net`` built by Hydra, ``optimizer`` and
``scheduler`` as ``_partial_`` factories, ``save_hyperparameters(logger=False,
ignore=["net"])``; the data module's hyperparameters hold a list from its yaml (a ListConfig),
a tuple, an enum and a path, as a team's may.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split
from torchmetrics import MaxMetric, MeanMetric
from torchmetrics.classification import MulticlassAccuracy


class SimpleDenseNet(nn.Module):
    def __init__(self, input_size: int = 16, hidden: int = 32, output_size: int = 4) -> None:
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(input_size, hidden), nn.ReLU(), nn.Linear(hidden, output_size)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class Scaling(Enum):
    NONE = "none"
    STANDARD = "standard"


class LHTLitModule(L.LightningModule):
    def __init__(
        self,
        net: nn.Module,
        optimizer: Any,
        scheduler: Any,
        compile: bool = False,
        scaling: Scaling = Scaling.STANDARD,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["net"])
        self.net = net
        self.criterion = nn.CrossEntropyLoss()
        self.train_acc, self.val_acc, self.test_acc = (MulticlassAccuracy(4) for _ in range(3))
        self.train_loss, self.val_loss, self.test_loss = (MeanMetric() for _ in range(3))
        self.val_acc_best = MaxMetric()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def model_step(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, y = batch
        logits = self.forward(x)
        return self.criterion(logits, y), logits.argmax(dim=1), y

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss, preds, targets = self.model_step(batch)
        self.train_loss(loss)
        self.train_acc(preds, targets)
        self.log("train/loss", self.train_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.val_loss(loss)
        self.val_acc(preds, targets)
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        self.val_acc_best(self.val_acc.compute())
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True, prog_bar=True)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.test_loss(loss)
        self.test_acc(preds, targets)
        self.log("test/loss", self.test_loss, on_step=False, on_epoch=True)
        self.log("test/acc", self.test_acc, on_step=False, on_epoch=True)

    def setup(self, stage: str) -> None:
        if self.hparams.compile and stage == "fit":
            self.net = torch.compile(self.net)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.hparams.optimizer(params=self.trainer.model.parameters())
        if self.hparams.scheduler is not None:
            scheduler = self.hparams.scheduler(optimizer=optimizer)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {
                    "scheduler": scheduler,
                    "monitor": "val/loss",
                    "interval": "epoch",
                },
            }
        return {"optimizer": optimizer}


class LHTDataModule(L.LightningDataModule):
    """Points labelled by a fixed random linear map, split as ``train_val_test_split`` says."""

    def __init__(
        self,
        data_dir: str = "data/",
        train_val_test_split: Any = (512, 128, 89),
        batch_size: int = 32,
        shape: tuple[int, int] = (4, 4),
        scaling: Scaling = Scaling.STANDARD,
        cache: Path = Path("cache"),
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(0)
        total = sum(self.hparams.train_val_test_split)
        x = torch.randn(total, self.hparams.shape[0] * self.hparams.shape[1], generator=generator)
        y = (x @ torch.randn(x.shape[1], 4, generator=generator)).argmax(dim=1)
        self.data_train, self.data_val, self.data_test = random_split(
            TensorDataset(x, y),
            list(self.hparams.train_val_test_split),
            generator=torch.Generator().manual_seed(42),
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.data_train, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.data_val, batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.data_test, batch_size=self.hparams.batch_size)
