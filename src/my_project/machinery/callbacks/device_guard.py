"""Stops a run before its first step if a tensor of the model will not follow it to its device:
the check (`devices/guard.py`) runs once when fit, validate, test or predict starts."""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn

from ..devices.guard import DevicePlacementError, check_device_placement, find_device_problems


class DeviceGuard(Callback):
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _check(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == TrainerFn.VALIDATING:  # fit's validations: on_fit_start did it
            _check(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _check(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _check(trainer, pl_module)


def _check(trainer: Trainer, pl_module: LightningModule) -> None:
    problems = find_device_problems(pl_module)
    # Every process votes (one collective, once): one stopping alone would leave the others
    # waiting for it at their next collective.
    if trainer.strategy.reduce_boolean_decision(bool(problems), all=False):
        check_device_placement(pl_module, problems)
        raise DevicePlacementError(
            f"Another process found tensors of {type(pl_module).__name__} that will not follow "
            "it to its device."
        )
