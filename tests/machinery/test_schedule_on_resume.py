"""A resume with other settings optimizes as its own config says, for any LightningModule.

The module here is written in plain Lightning-docs style (its `configure_optimizers` reads
the horizon from the Trainer), not the example classifier: the callback compares the
schedulers and optimizers that module configures with the restored ones. Real Trainers, real
checkpoints, on the CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from my_project.machinery.callbacks.schedule_on_resume import ScheduleOnResume
from my_project.machinery.errors import UserError

STEPS_PER_EPOCH = 4


class PlainModule(L.LightningModule):
    def __init__(
        self,
        lr: float = 0.1,
        schedule: str = "cosine",
        weight_decay: float = 0.0,
        total_steps: int = 12,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 2)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.layer(x), y)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
        if self.hparams.schedule == "none":
            return optimizer
        if self.hparams.schedule == "onecycle":
            scheduler = torch.optim.lr_scheduler.OneCycleLR(
                optimizer, max_lr=self.hparams.lr, total_steps=self.hparams.total_steps
            )
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=self.trainer.max_epochs
        )
        return [optimizer], [scheduler]

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(16, 4, generator=generator), torch.arange(16) % 2)
        return DataLoader(data, batch_size=16 // STEPS_PER_EPOCH)


class LearningRates(Callback):
    """The learning rate each training step used (and the weight decay of the first)."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.weight_decay: float | None = None

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])
        if self.weight_decay is None:
            self.weight_decay = trainer.optimizers[0].param_groups[0]["weight_decay"]


def fit(
    module: PlainModule,
    folder: Path,
    max_epochs: int,
    ckpt_path: str | None = None,
    resume_callback: bool = True,
) -> LearningRates:
    rates = LearningRates()
    callbacks: list[Callback] = [rates, ModelCheckpoint(dirpath=folder, save_last=True)]
    if resume_callback:
        callbacks.append(ScheduleOnResume())
    trainer = L.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        default_root_dir=folder,
    )
    trainer.fit(module, ckpt_path=ckpt_path)
    return rates


def test_more_epochs_on_resume_rebuild_the_schedule_over_the_new_horizon(tmp_path: Path) -> None:
    torch.manual_seed(0)
    fit(PlainModule(), tmp_path / "first", max_epochs=1)
    torch.manual_seed(0)
    resumed = fit(PlainModule(), tmp_path / "first", 3, str(tmp_path / "first" / "last.ckpt"))
    torch.manual_seed(0)
    uninterrupted = fit(PlainModule(), tmp_path / "whole", max_epochs=3)

    assert all(rate > 0 for rate in resumed.rates), resumed.rates
    # The epochs after the first train as a 3-epoch run does, not at lr 0 nor from lr 0.1 again.
    assert resumed.rates == uninterrupted.rates[STEPS_PER_EPOCH:]


def test_without_the_callback_lightning_restores_the_old_horizon(tmp_path: Path) -> None:
    """What the callback is for: Lightning alone trains the second epoch at lr 0."""
    fit(PlainModule(), tmp_path, max_epochs=1)
    resumed = fit(PlainModule(), tmp_path, 3, str(tmp_path / "last.ckpt"), resume_callback=False)
    assert resumed.rates[:STEPS_PER_EPOCH] == [0.0] * STEPS_PER_EPOCH


def test_an_unchanged_resume_keeps_the_restored_state_exactly(tmp_path: Path) -> None:
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=tmp_path, filename="{epoch}", save_top_k=-1)],
    )
    trainer.fit(PlainModule())
    saved = torch.load(tmp_path / "epoch=0.ckpt", weights_only=False)

    class Capture(Callback):
        def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            self.state = trainer.lr_scheduler_configs[0].scheduler.state_dict()
            self.lr = trainer.optimizers[0].param_groups[0]["lr"]

    capture = Capture()
    resumed = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[ScheduleOnResume(), capture],
    )
    resumed.fit(PlainModule(), ckpt_path=str(tmp_path / "epoch=0.ckpt"))
    assert capture.state == saved["lr_schedulers"][0]
    assert capture.lr == saved["optimizer_states"][0]["param_groups"][0]["lr"]


def test_a_lower_learning_rate_on_resume_is_applied_without_a_scheduler(tmp_path: Path) -> None:
    fit(PlainModule(lr=0.1, schedule="none"), tmp_path, max_epochs=1)
    resumed = fit(
        PlainModule(lr=0.001, schedule="none", weight_decay=0.5),
        tmp_path,
        2,
        str(tmp_path / "last.ckpt"),
    )
    assert resumed.rates == [0.001] * STEPS_PER_EPOCH
    assert resumed.weight_decay == 0.5


def test_a_schedule_that_ends_before_the_restored_step_stops_with_what_to_change(
    tmp_path: Path,
) -> None:
    fit(PlainModule(schedule="onecycle", total_steps=12), tmp_path, max_epochs=2)
    # This run's OneCycleLR has fewer total steps than the checkpoint already took.
    module = PlainModule(schedule="onecycle", total_steps=6)
    with pytest.raises(
        UserError, match=r"OneCycleLR.*cannot continue from the checkpoint's step 8"
    ):
        fit(module, tmp_path, 3, str(tmp_path / "last.ckpt"))
