"""The LightningModule: an image classifier around any network from `models.nets`.

Every metric is a torchmetrics object registered as a submodule, so `.to(device)` moves it
with the weights and DDP synchronises it; metrics are updated on the device and computed (one
host sync) only at epoch end. The step does nothing that waits for the device: no
``self.log`` per step, no torchmetrics input checks (``torch.unique``: a host sync on every
update; ``cross_entropy`` already rejects bad labels), and the loss is averaged by `MeanLoss`.
Training steps hand their outputs to the metrics every `metric_update_every` steps in one
update (`PendingUpdates`): the same states, for a tenth of the per-step cost.

Hyperparameters are plain dicts and numbers (never modules or partials), so checkpoints load
under torch's default ``weights_only=True`` and need no config to be rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch import LightningModule
from torch import Tensor
from torchmetrics import MaxMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix

from ..machinery.callbacks.lean_steps import precomputed_signature
from ..machinery.metrics import MeanLoss, PendingUpdates
from ..machinery.strategies.dp import parallel_forward

STAGES = ("train", "val", "test")


class ImageClassifier(LightningModule):
    # Training steps' outputs wait on the device and reach the train metrics in one update
    # every this many steps (and at epoch end, and before any state_dict, so checkpoints are
    # exact): ~0.1 ms per step saved, for the memory of 64 batches of predicted labels. An
    # epoch shorter than that (digits: 20 steps) has one update, at its end.
    metric_update_every = 64

    def __init__(
        self,
        net: dict[str, Any],
        num_classes: int,
        image_shape: Sequence[int],
        lr: float = 1e-3,
        optimizer: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = instantiate(net, in_shape=list(image_shape), num_classes=num_classes)
        if compile:
            # In place: the state dict keeps its keys, so checkpoints load with or without it.
            self.net.compile()

        accuracy = MetricCollection(
            {"acc": MulticlassAccuracy(num_classes, average="micro", validate_args=False)},
            compute_groups=False,  # one metric: nothing to share, less work per update
        )
        self.train_metrics = accuracy.clone(prefix="train/")
        self.val_metrics = accuracy.clone(prefix="val/")
        self.test_metrics = accuracy.clone(prefix="test/")
        self.train_loss, self.val_loss, self.test_loss = MeanLoss(), MeanLoss(), MeanLoss()
        self.val_acc_best = MaxMetric()
        self.test_confusion = MulticlassConfusionMatrix(num_classes=num_classes)
        # Saved in checkpoints, so a run resumed mid-epoch (or after its best epoch) reports
        # the same train metrics and best accuracy as one that never stopped.
        for metric in (self.train_metrics, self.train_loss, self.val_acc_best):
            metric.persistent(True)
        self._pending_train = PendingUpdates()

    def forward(self, x: Tensor) -> Tensor:
        # Under `trainer.strategy=dp` only this call is split across the GPUs; steps, metrics
        # and logging stay in one place (strategies/dp.py). Elsewhere it is `self.net(x)`.
        return parallel_forward(self, self.net, x)

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets `_current_fx_name` around every hook call, a dozen times per step, and
        # nn.Module.__setattr__ first checks parameters, modules and buffers: ~4% of a small
        # model's step. It is a plain attribute, so it is set directly.
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    # -- steps: update metrics on the device, never sync to the host --------------------------
    def _step(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y), logits.argmax(dim=1), y

    def _update_eval_metrics(self, stage: str, loss: Tensor, preds: Tensor, y: Tensor) -> None:
        getattr(self, f"{stage}_loss").update(loss, y.shape[0])
        getattr(self, f"{stage}_metrics").update(preds, y)

    def update_train_metrics(self) -> None:
        """Feed the training steps' pending outputs to the train metrics (one update)."""
        self._pending_train.flush(self.train_metrics, self.train_loss)

    @precomputed_signature
    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss, preds, y = self._step(batch)
        self._pending_train.add(loss, preds, y)
        if len(self._pending_train) >= self.metric_update_every:
            self.update_train_metrics()
        return loss

    @precomputed_signature
    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._update_eval_metrics("val", *self._step(batch))

    @precomputed_signature
    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        loss, preds, y = self._step(batch)
        self._update_eval_metrics("test", loss, preds, y)
        self.test_confusion.update(preds, y)

    @precomputed_signature
    def predict_step(self, batch: Any, batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        return torch.softmax(self(x), dim=1)

    # -- epoch ends: compute (synchronised across processes by torchmetrics), log, reset -------
    def _log_epoch(self, stage: str) -> dict[str, Tensor]:
        metrics = getattr(self, f"{stage}_metrics")
        loss = getattr(self, f"{stage}_loss")
        values = {**metrics.compute(), f"{stage}/loss": loss.compute()}
        metrics.reset()
        loss.reset()
        self.log_dict(values, prog_bar=stage != "train", sync_dist=self._sync_dist)
        return values

    @property
    def _sync_dist(self) -> bool:
        # Values are already identical on every rank (torchmetrics synchronised them); under
        # DDP sync_dist only keeps Lightning's bookkeeping (and its warning) quiet, for one tiny
        # all-reduce per epoch. In one process it would only cost ~0.15 ms per value logged.
        return self.trainer.world_size > 1

    def on_train_epoch_end(self) -> None:
        self.update_train_metrics()
        self._log_epoch("train")

    def on_validation_epoch_end(self) -> None:
        values = self._log_epoch("val")
        if self.trainer.sanity_checking:
            return  # an untrained model's accuracy is no best (and a resumed run has one)
        self.val_acc_best.update(values["val/acc"])
        self.log(
            "val/acc_best", self.val_acc_best.compute(), prog_bar=True, sync_dist=self._sync_dist
        )

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")
        self.test_confusion.reset()

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        # A checkpoint saved mid-epoch holds every step's metric updates: resumes are exact.
        self.update_train_metrics()
        return super().state_dict(*args, **kwargs)

    # -- optimisation ----------------------------------------------------------------------
    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        # Lightning calls this every step; its default validates the algorithm name (a scan
        # of an enum) before it finds there is nothing to clip. `trainer.gradient_clip_val`
        # and `gradient_clip_algorithm` behave exactly as with the default.
        if gradient_clip_val:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

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
