"""A resumed run optimizes as its own config says, and says so when that differs.

Lightning restores optimizers and schedulers whole, settings included: a resume with
``trainer.max_epochs=40`` keeps the first run's cosine ``T_max`` (the learning rate reaches 0 at
the old horizon), one with ``model.lr=0.001`` the old rate. Every checkpoint here records what
its run's config built before any step (optimizer settings, scheduler states). A resume whose
config builds the same keeps the restored state untouched (exact). One whose config builds
something else gets it: every optimizer setting from this run's config (moments and step
counts stay restored), each scheduler this run's, stepped from step 0 to the checkpoint's step
(a ``ReduceLROnPlateau`` starts afresh); one line says what changed.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.optim.lr_scheduler import ReduceLROnPlateau

from ..errors import UserError


class ScheduleOnResume(Callback):
    def __init__(self) -> None:
        self._built: tuple[list[Any], list[Any]] | None = None  # this run's, before any step
        self._recorded: dict[str, Any] | None = None  # the checkpoint's run's

    def state_dict(self) -> dict[str, Any]:
        return (
            _plain({"optimizers": self._built[0], "schedulers": self._built[1]})
            if self._built
            else {}
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._recorded = state_dict or None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        groups = [
            [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]
            for o in trainer.optimizers
        ]
        states = [config.scheduler.state_dict() for config in trainer.lr_scheduler_configs]
        self._built = copy.deepcopy((groups, states))

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        recorded, self._recorded, built = self._recorded, None, self.state_dict()
        if not (recorded and built and trainer.ckpt_path) or recorded.keys() != built.keys():
            return  # nothing recorded (another callback's checkpoint): Lightning's restore stays
        if recorded == built or self._built is None:
            return
        groups, states = copy.deepcopy(self._built)
        for optimizer, configured in zip(trainer.optimizers, groups, strict=True):
            for group, values in zip(optimizer.param_groups, configured, strict=True):
                group.update(values)
        for config, state in zip(trainer.lr_scheduler_configs, states, strict=True):
            steps = config.scheduler.last_epoch - state["last_epoch"]
            config.scheduler.load_state_dict(state)
            if not isinstance(config.scheduler, ReduceLROnPlateau):
                _step(config.scheduler, steps, trainer.global_step)
        rank_zero_info(
            f"Resumed at step {trainer.global_step} with this run's optimizer settings and "
            f"schedules, rebuilt from step 0: {'; '.join(_changes(trainer, recorded, built))}."
        )


def _changes(trainer: Trainer, recorded: dict[str, Any], built: dict[str, Any]) -> list[str]:
    """``AdamW lr 0.1 -> 0.001``, ``CosineAnnealingLR T_max 1 -> 3``, ..."""
    objects = [*trainer.optimizers, *(c.scheduler for c in trainer.lr_scheduler_configs)]
    old = [*recorded["optimizers"], *recorded["schedulers"]]
    new = [*built["optimizers"], *built["schedulers"]]
    changes = []
    for obj, before, after in zip(objects, old, new, strict=False):
        pairs = zip(before, after, strict=False) if isinstance(before, list) else [(before, after)]
        for a, b in pairs:  # an optimizer's parameter groups, or a scheduler's state
            changes += [
                f"{type(obj).__name__} {key} {a[key]!r} -> {b.get(key)!r}"
                for key in a
                if a[key] != b.get(key) and key != "_last_lr"
            ]
    return changes


def _step(scheduler: Any, steps: int, at: int) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"
            for _ in range(steps):
                scheduler.step()
    except Exception as error:
        raise UserError(
            f"This run's learning-rate schedule ({type(scheduler).__name__}) cannot continue from "
            f"the checkpoint's step {at}: {error}. Make it reach at least that step (e.g. a larger "
            "`total_steps` for OneCycleLR), or resume with the original run's settings."
        ) from error


def _plain(value: Any) -> Any:
    """Numbers, strings and lists (what ``==`` compares and a weights_only checkpoint loads);
    None for anything else."""
    if isinstance(value, Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value if isinstance(value, (int, float, str, bool, type(None))) else None
