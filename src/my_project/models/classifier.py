"""The LightningModule of the example: an image classifier around any network of `nets`.

Written as the Lightning docs write one. The network is built in ``__init__`` and called from
``forward``; each step computes the loss and updates torchmetrics metrics (attributes of the
module, so they follow it to its device and synchronise across processes); each epoch logs
their values once. Devices, strategies, speed, checkpoints and plots are the template's
machinery, not this file's.

Hyperparameters are plain values (the network is a config dict, built here), so checkpoints
load under torch's default ``weights_only=True`` and rebuild the model without a config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch import LightningModule
from torch import Tensor
from torchmetrics import MaxMetric, Metric
from torchmetrics.classification import MulticlassAccuracy

from ..machinery.metrics import MeanLoss


class ImageClassifier(LightningModule):
    def __init__(
        self,
        net: dict[str, Any],
        num_classes: int,
        in_shape: Sequence[int],
        lr: float = 1e-3,
        optimizer: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = instantiate(net, in_shape=list(in_shape), num_outputs=num_classes)
        if compile:
            # In place: the state dict keeps its keys, so checkpoints load with or without it.
            self.net.compile()
        # validate_args=False: the checks call torch.unique, which waits for the GPU at every
        # step; cross_entropy already rejects labels out of range.
        accuracy = MulticlassAccuracy(num_classes, average="micro", validate_args=False)
        self.train_acc, self.val_acc, self.test_acc = accuracy, accuracy.clone(), accuracy.clone()
        self.train_loss, self.val_loss, self.test_loss = MeanLoss(), MeanLoss(), MeanLoss()
        self.val_acc_best = MaxMetric()
        # Kept in checkpoints: a run resumed mid-epoch (or after its best epoch) reports the
        # same train metrics and best accuracy as one that never stopped.
        for metric in (self.train_acc, self.train_loss, self.val_acc_best):
            metric.persistent(True)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def _step(self, batch: tuple[Tensor, Tensor], loss_sum: MeanLoss, accuracy: Metric) -> Tensor:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        loss_sum.update(loss, len(y))
        accuracy.update(logits.argmax(dim=1), y)
        return loss

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, self.train_loss, self.train_acc)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, self.val_loss, self.val_acc)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, self.test_loss, self.test_acc)

    def predict_step(self, batch: Any, batch_idx: int) -> dict[str, Tensor]:
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        probabilities = torch.softmax(self(x), dim=1)
        return {"prediction": probabilities.argmax(dim=1), "prob": probabilities}

    # -- once per epoch: compute (synchronised across processes by torchmetrics), log, reset --
    def _log_epoch(self, stage: str, loss_sum: MeanLoss, accuracy: Metric) -> Tensor:
        values = {f"{stage}/loss": loss_sum.compute(), f"{stage}/acc": accuracy.compute()}
        self.log_dict(values, prog_bar=stage != "train", sync_dist=True)
        loss_sum.reset()
        accuracy.reset()
        return values[f"{stage}/acc"]

    def on_train_epoch_end(self) -> None:
        self._log_epoch("train", self.train_loss, self.train_acc)

    def on_validation_epoch_end(self) -> None:
        accuracy = self._log_epoch("val", self.val_loss, self.val_acc)
        if self.trainer.sanity_checking:
            return  # an untrained model's accuracy is no best (and a resumed run has one)
        self.val_acc_best.update(accuracy)
        self.log("val/acc_best", self.val_acc_best.compute(), prog_bar=True, sync_dist=True)

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test", self.test_loss, self.test_acc)

    def configure_optimizers(self) -> Any:
        spec = self.hparams.optimizer or {"_target_": "torch.optim.Adam"}
        optimizer = instantiate(spec, params=self.parameters(), lr=self.hparams.lr)
        if not self.hparams.scheduler:
            return optimizer
        scheduler_cfg = dict(self.hparams.scheduler)
        interval = scheduler_cfg.pop("interval", "epoch")
        monitor = scheduler_cfg.pop("monitor", "val/loss")
        scheduler = instantiate(scheduler_cfg, optimizer=optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": interval, "monitor": monitor},
        }
