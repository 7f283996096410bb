"""A resumed run optimizes as its own config says, and says so when that differs.

Lightning restores optimizers and schedulers whole, settings included: a resume with
``trainer.max_epochs=40`` keeps the first run's cosine ``T_max`` (the learning rate reaches 0 at
the old horizon), one with ``model.lr=0.001`` the old rate. Every checkpoint here records what its
run's config built. If this run's builds the same, the restored state stays untouched; else its
optimizer settings apply (moments stay) and each schedule is rebuilt to the checkpoint's step.
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
        self._built: dict[str, Any] = {}  # this run's, before any step
        self._recorded: dict[str, Any] = {}  # the checkpoint's run's

    def state_dict(self) -> dict[str, Any]:
        return _plain(self._built)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._recorded = state_dict

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        groups = [
            [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]
            for o in trainer.optimizers
        ]
        states = [config.scheduler.state_dict() for config in trainer.lr_scheduler_configs]
        self._built = copy.deepcopy({"optimizers": groups, "schedulers": states})

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        recorded, self._recorded, fresh = self._recorded, {}, copy.deepcopy(self._built)
        if not trainer.ckpt_path or recorded.keys() != fresh.keys() or recorded == _plain(fresh):
            return  # not resumed, not this callback's record, or nothing changed: exact
        for optimizer, groups in zip(trainer.optimizers, fresh["optimizers"], strict=True):
            for group, settings in zip(optimizer.param_groups, groups, strict=True):
                group.update(settings)  # the moments and step counts stay as restored
        for config, state in zip(trainer.lr_scheduler_configs, fresh["schedulers"], strict=True):
            steps = config.scheduler.last_epoch - state["last_epoch"]
            config.scheduler.load_state_dict(state)
            if isinstance(config.scheduler, ReduceLROnPlateau):
                continue  # it starts afresh
            try:
                with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()"
                    warnings.simplefilter("ignore")
                    for _ in range(steps):
                        config.scheduler.step()
            except Exception as error:
                raise UserError(
                    f"This run's learning-rate schedule ({type(config.scheduler).__name__}) cannot "
                    f"continue from the checkpoint's step {trainer.global_step}: {error}. Make it "
                    "reach that step (e.g. a larger `total_steps` for OneCycleLR), or resume with "
                    "the original run's settings."
                ) from error
        rank_zero_info(
            f"Resumed at step {trainer.global_step} with this run's optimizer settings and "
            "learning-rate schedules (rebuilt from step 0), not the checkpoint's, which differ."
        )


def _plain(value: Any) -> Any:
    """Numbers, strings and lists (what ``==`` compares and a weights_only checkpoint loads)."""
    if isinstance(value, Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value if isinstance(value, (int, float, str, bool, type(None))) else None
