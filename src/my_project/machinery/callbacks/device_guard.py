"""Stops a run before its first step if a tensor of the model will not follow it to its device.

The check (`devices/guard.py`) runs once when fit, validate, test or predict starts, after the
strategy has moved the module (``strategy.setup`` comes before these hooks): no per-batch cost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_warn

from ..devices.guard import DevicePlacementError, describe_problems, find_device_problems

log = logging.getLogger(__name__)
# Strategies that place parameters themselves (sharded, possibly offloaded to the CPU).
_PLACING = (DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy)


class DevicePlacementWarning(UserWarning):
    """What `DeviceGuard` reports with ``strict=False``."""


class DeviceGuard(Callback):
    """Fail (``strict``) or warn when the module holds tensors that will not follow it;
    ``ignore``: attribute paths (shell-style patterns) left out on purpose."""

    def __init__(self, strict: bool = True, ignore: Sequence[str] = ()) -> None:
        self.strict, self.ignore = strict, [str(pattern) for pattern in ignore]

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == TrainerFn.VALIDATING:  # fit's validations: on_fit_start did it
            self._check(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def _check(self, trainer: Trainer, pl_module: LightningModule) -> None:
        start, name = time.perf_counter(), type(pl_module).__name__
        placing = isinstance(trainer.strategy, _PLACING)
        problems = find_device_problems(pl_module, ignore=self.ignore, check_registered=not placing)
        # Every process votes (one collective, once): one stopping alone would leave the others
        # waiting for it at their next collective.
        if not trainer.strategy.reduce_boolean_decision(bool(problems), all=False):
            ms = (time.perf_counter() - start) * 1e3
            if trainer.is_global_zero:
                log.info(
                    f"Device guard: every tensor of {name} follows it to {pl_module.device} (checked in {ms:.1f} ms)."
                )
            return
        message = (
            describe_problems(problems, pl_module)
            if problems
            else f"Another process found tensors of {name} that will not follow it to its device."
        )
        if not self.strict:
            rank_zero_warn(message, category=DevicePlacementWarning)
            return
        raise DevicePlacementError(
            f"{message}\nTo warn instead of failing, set `callbacks.device_guard.strict=false` "
            "(DeviceGuard(strict=False)); to leave an attribute out on purpose, add its path to "
            "`callbacks.device_guard.ignore`."
        )
