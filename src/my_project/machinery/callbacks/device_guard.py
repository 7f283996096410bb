"""Stops a run whose model's tensors meet on different devices, naming each tensor and its fix.

The first batch of each stage (fit's training and validation, validate, test, predict) runs its
step inside the device watch (`devices/guard.py`): an operation that gets a tensor the model
holds but Lightning does not move, where torch refuses it, is named with that tensor and the
fix; a module that moves its tensors itself, or uses them as torch allows, is never stopped.
Every process votes once (a collective), so they stop together: in training after the first
batch, in validation and test after the first run of the loop (a process may have fewer
batches than another there), the process that found a problem finishing its batches with the
tensors moved.
"""

from __future__ import annotations

import functools
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn

from ..devices.guard import DevicePlacementError, DeviceWatch


class DeviceGuard(Callback):
    def __init__(self) -> None:
        self.watches: dict[str, DeviceWatch] = {}  # by step, until its verdict
        self.watched: set[str] = set()  # the steps watched in this stage
        self.voted: set[str] = set()  # the steps of this stage whose verdict is given

    def new_stage(self) -> None:
        self.watched.clear()
        self.voted.clear()

    # -- a stage starts: each of its steps is watched once ------------------------------------
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.new_stage()

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == TrainerFn.VALIDATING:  # fit's validations: part of fit's stage
            self.new_stage()

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.new_stage()

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.new_stage()

    # -- the first batch of each step ---------------------------------------------------------
    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.watch(pl_module, "training_step")

    def on_validation_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, *_: Any
    ) -> None:
        self.watch(pl_module, "validation_step")

    def on_test_batch_start(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.watch(pl_module, "test_step")

    def on_predict_batch_start(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.watch(pl_module, "predict_step")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.verdict(trainer, pl_module, "training_step")  # every process has this batch

    def on_validation_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, *_: Any
    ) -> None:
        self.batch_done(trainer, pl_module, "validation_step")

    def on_test_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.batch_done(trainer, pl_module, "test_step")

    def on_predict_batch_end(self, trainer: Trainer, pl_module: LightningModule, *_: Any) -> None:
        self.batch_done(trainer, pl_module, "predict_step")

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.verdict(trainer, pl_module, "validation_step")

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.verdict(trainer, pl_module, "test_step")

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.verdict(trainer, pl_module, "predict_step")

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        for step in list(self.watches):
            self.unwatch(pl_module, step)

    # -----------------------------------------------------------------------------------------
    def watch(self, pl_module: LightningModule, step: str) -> None:
        """Run the next call of ``step`` inside a device watch (an attribute of the instance,
        which Lightning's call finds before the class's method, removed at the verdict)."""
        if step in self.watched:
            return
        self.watched.add(step)
        watch = self.watches[step] = DeviceWatch(pl_module)
        method = getattr(pl_module, step)

        @functools.wraps(method)  # Lightning reads its signature (which arguments to pass)
        def watched(*args: Any, **kwargs: Any) -> Any:
            with watch:
                return method(*args, **kwargs)

        setattr(pl_module, step, watched)

    def unwatch(self, pl_module: LightningModule, step: str) -> DeviceWatch | None:
        watch = self.watches.pop(step, None)
        if watch is not None and step in vars(pl_module):
            delattr(pl_module, step)
        return watch

    def batch_done(self, trainer: Trainer, pl_module: LightningModule, step: str) -> None:
        """One process decides at once; several at the end of the loop (all reach it), where
        the one that found a problem watches on, finishing each batch with tensors moved."""
        watch = self.watches.get(step)
        if watch is None:
            return
        if trainer.world_size == 1:
            self.verdict(trainer, pl_module, step)
        elif not watch.problems:
            self.unwatch(pl_module, step)
            self.watches[step] = watch  # no more watching here; its vote is at the loop's end

    def verdict(self, trainer: Trainer, pl_module: LightningModule, step: str) -> None:
        """Every process votes (one collective, once a stage and step), also one that had no
        batch of the loop: one stopping alone would leave the others waiting for it at their
        next collective."""
        watch = self.unwatch(pl_module, step)
        if step in self.voted or (watch is None and trainer.world_size == 1):
            return
        self.voted.add(step)
        problems = bool(watch is not None and watch.problems)
        if trainer.strategy.reduce_boolean_decision(problems, all=False):
            if watch is not None and watch.problems:
                raise watch.error(step)
            raise DevicePlacementError(
                f"Another process found tensors of {type(pl_module).__name__} that did not "
                "follow it to its device (its message says which)."
            )
