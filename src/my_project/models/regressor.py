"""A LightningModule for regression: one number per sample, from any network of `nets`.

Written as the Lightning docs write one. ``forward`` predicts in the target's own units
(the network works in standard units: ``target_mean + target_std * net(x)``); the loss is the
mean squared error in standard units, so its scale does not depend on the target's; the
metrics, torchmetrics ``MeanSquaredError`` and ``R2Score`` attributes of the module, are in
the target's units and follow the model to its device and across processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch import LightningModule
from torch import Tensor
from torchmetrics import MaxMetric, MeanSquaredError, R2Score


class TabularRegressor(LightningModule):
    def __init__(
        self,
        net: dict[str, Any],
        in_shape: Sequence[int],
        target_mean: float = 0.0,
        target_std: float = 1.0,
        lr: float = 1e-3,
        optimizer: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = instantiate(net, in_shape=list(in_shape), num_outputs=1)
        self.train_mse, self.val_mse, self.test_mse = (MeanSquaredError() for _ in range(3))
        self.train_r2, self.val_r2, self.test_r2 = (R2Score() for _ in range(3))
        self.val_r2_best = MaxMetric()

    def forward(self, x: Tensor) -> Tensor:
        return self.hparams.target_mean + self.hparams.target_std * self.net(x).squeeze(-1)

    def _step(self, batch: tuple[Tensor, Tensor], mse: MeanSquaredError, r2: R2Score) -> Tensor:
        x, y = batch
        predicted = self(x)
        mse.update(predicted, y)
        r2.update(predicted, y)
        return F.mse_loss(predicted, y) / self.hparams.target_std**2

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, self.train_mse, self.train_r2)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, self.val_mse, self.val_r2)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, self.test_mse, self.test_r2)

    # -- once per epoch: compute (synchronised across processes by torchmetrics), log, reset --
    def _log_epoch(self, stage: str, mse: MeanSquaredError, r2: R2Score) -> Tensor:
        values = {f"{stage}/mse": mse.compute(), f"{stage}/r2": r2.compute()}
        self.log_dict(values, prog_bar=stage != "train", sync_dist=True)
        mse.reset()
        r2.reset()
        return values[f"{stage}/r2"]

    def on_train_epoch_end(self) -> None:
        self._log_epoch("train", self.train_mse, self.train_r2)

    def on_validation_epoch_end(self) -> None:
        r2 = self._log_epoch("val", self.val_mse, self.val_r2)
        if self.trainer.sanity_checking:
            return
        self.val_r2_best.update(r2)
        self.log("val/r2_best", self.val_r2_best.compute(), prog_bar=True, sync_dist=True)

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test", self.test_mse, self.test_r2)

    def configure_optimizers(self) -> Any:
        spec = self.hparams.optimizer or {"_target_": "torch.optim.Adam"}
        optimizer = instantiate(spec, params=self.parameters(), lr=self.hparams.lr)
        if not self.hparams.scheduler:
            return optimizer
        scheduler_cfg = dict(self.hparams.scheduler)
        interval = scheduler_cfg.pop("interval", "epoch")
        monitor = scheduler_cfg.pop("monitor", "val/mse")
        scheduler = instantiate(scheduler_cfg, optimizer=optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": interval, "monitor": monitor},
        }
