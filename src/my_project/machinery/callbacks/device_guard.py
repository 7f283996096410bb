"""Stops a run before its first step if a tensor of the model will not follow it to its device.

The check (:func:`my_project.utils.device_guard.find_device_problems`) runs once when
``fit``, ``validate``, ``test`` or ``predict`` starts, after the strategy has moved the
module (Lightning 2.6 calls ``strategy.setup``, which moves it, before ``on_fit_start`` and
before the loops' ``on_*_start`` hooks). No per-batch hook: a run pays for it once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_warn

from ..devices.guard import DevicePlacementError, describe_problems, find_device_problems

log = logging.getLogger(__name__)


class DevicePlacementWarning(UserWarning):
    """What :class:`DeviceGuard` reports with ``strict=False``."""


class DeviceGuard(Callback):
    """Fail (``strict=True``) or warn when the module holds tensors that will not follow it.

    Args:
        strict: raise :class:`DevicePlacementError` before the first step; ``False`` warns.
        ignore: attribute paths (shell-style patterns) to leave out, e.g. a teacher model kept
            in a list on purpose so that it is neither trained nor saved.
    """

    def __init__(self, strict: bool = True, ignore: Sequence[str] = ()) -> None:
        self.strict = strict
        self.ignore = [str(pattern) for pattern in ignore]

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Also called for every validation epoch of `fit`, which on_fit_start has covered.
        if trainer.state.fn == TrainerFn.VALIDATING:
            self._check(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._check(trainer, pl_module)

    def _check(self, trainer: Trainer, pl_module: LightningModule) -> None:
        start = time.perf_counter()
        problems = find_device_problems(
            pl_module, ignore=self.ignore, check_registered=not _shards_or_offloads(trainer)
        )
        seconds = time.perf_counter() - start
        # All processes vote (a collective, so all take part whatever they found): if one
        # stops alone, the others wait for it forever at their next collective.
        found = _any_process(trainer, bool(problems))
        name = type(pl_module).__name__
        if not found:
            if trainer.is_global_zero:
                log.info(
                    f"Device guard: every tensor of {name} follows it to {pl_module.device} "
                    f"(checked in {seconds * 1e3:.1f} ms)."
                )
            return
        message = (
            describe_problems(problems, pl_module)
            if problems
            else f"Another process found tensors of {name} that will not follow it to its device."
        )
        hint = (
            "\nTo warn instead of failing, set `callbacks.device_guard.strict=false` "
            "(DeviceGuard(strict=False)); to leave an attribute out on purpose, add its path to "
            "`callbacks.device_guard.ignore`."
        )
        if self.strict:
            raise DevicePlacementError(message + hint)
        rank_zero_warn(message, category=DevicePlacementWarning)


def _any_process(trainer: Trainer, decision: bool) -> bool:
    """True if any process decided True (one tiny all-reduce under DDP, once per run)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if trainer.world_size > 1 and distributed:
        return trainer.strategy.reduce_boolean_decision(decision, all=False)
    return decision


def _shards_or_offloads(trainer: Trainer) -> bool:
    """Strategies that place parameters themselves (sharded, possibly offloaded to the CPU)."""
    from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy

    return isinstance(trainer.strategy, (DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy))
