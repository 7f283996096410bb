"""A resume whose config builds other optimizer settings or schedules than its checkpoint's stops.

Lightning restores optimizers and schedulers whole, settings included: a resume with
``trainer.max_epochs=40`` would silently keep the first run's cosine ``T_max`` (the learning
rate reaching 0 at the old horizon), one with ``model.lr=0.001`` the old rate. Every checkpoint
here records what its run's config built before any step; a resume whose config builds
something else is refused before training, and one that builds the same is left exact.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor

from ..errors import UserError


class ScheduleOnResume(Callback):
    def __init__(self) -> None:
        self._built: dict[str, Any] = {}  # this run's, before any step
        self._recorded: dict[str, Any] = {}  # the checkpoint's run's

    def state_dict(self) -> dict[str, Any]:
        return self._built

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._recorded = state_dict

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Before Lightning restores the checkpoint's optimizers and schedulers over these."""
        groups = [
            [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]
            for o in trainer.optimizers
        ]
        states = [config.scheduler.state_dict() for config in trainer.lr_scheduler_configs]
        self._built = _plain({"optimizers": groups, "schedulers": states})
        recorded, self._recorded = self._recorded, {}
        if trainer.ckpt_path and recorded.keys() == self._built.keys() and recorded != self._built:
            raise UserError(
                "This resume's config builds other optimizer settings or learning-rate schedules "
                "than the run that wrote the checkpoint (e.g. another `model.lr`, or a "
                "`trainer.max_epochs` its schedule follows), and Lightning would silently go on "
                "with the checkpoint's. Resume with the original run's settings, or start a new "
                "run with the new ones.",
                every_rank=True,
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
