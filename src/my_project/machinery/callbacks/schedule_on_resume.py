"""A resumed run optimizes as its own config says: settings from the config, progress from
the checkpoint.

Lightning restores optimizers and learning-rate schedulers whole from the checkpoint, settings
included: a resume with ``trainer.max_epochs=40`` keeps the first run's cosine ``T_max``, so the
learning rate reaches 0 at the old horizon and the schedule starts over; a resume with
``model.lr=0.001`` keeps the old learning rate. This works for any ``configure_optimizers``:

- before the restore (``on_fit_start``) it keeps what this run's config built: the optimizers'
  settings and each scheduler's state at step 0;
- after it (``on_train_start``) every optimizer setting differing from this run's config is set
  to the config's value (moments and step counts stay restored), and each scheduler is rebuilt:
  this run's scheduler stepped from step 0 to the checkpoint's step. When that ends at the
  restored learning rates, nothing changed and the restored state is kept as it was (resumes
  stay bit-exact); otherwise the rebuilt schedule is used and one line says what changed. A
  schedule that cannot reach the checkpoint's step (``OneCycleLR`` with fewer ``total_steps``)
  stops the run with what to change.

``ReduceLROnPlateau`` follows a metric rather than a horizon: it keeps its restored state.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from torch.optim.lr_scheduler import ReduceLROnPlateau

from ..errors import UserError

# Optimizer settings a scheduler drives: the schedule's, not compared as settings.
_SCHEDULED = ("lr", "initial_lr")


@dataclass
class _Configured:
    """What this run's config built, before the checkpoint was restored over it."""

    param_groups: list[list[dict[str, Any]]]  # per optimizer, per group, without the params
    schedulers: list[dict[str, Any]]  # each scheduler's state_dict at step 0


class ScheduleOnResume(Callback):
    def __init__(self) -> None:
        self._configured: _Configured | None = None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._configured = None
        if trainer.ckpt_path is None:
            return
        self._configured = _Configured(
            param_groups=[
                [
                    {key: copy.deepcopy(value) for key, value in group.items() if key != "params"}
                    for group in optimizer.param_groups
                ]
                for optimizer in trainer.optimizers
            ],
            schedulers=[
                copy.deepcopy(config.scheduler.state_dict())
                for config in trainer.lr_scheduler_configs
            ],
        )

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        configured, self._configured = self._configured, None
        if configured is None:
            return
        scheduled = {id(config.scheduler.optimizer) for config in trainer.lr_scheduler_configs}
        changes = []
        for optimizer, groups in zip(trainer.optimizers, configured.param_groups, strict=True):
            skip = _SCHEDULED if id(optimizer) in scheduled else ()
            changes += _apply_settings(optimizer, groups, skip)
        for config, state in zip(trainer.lr_scheduler_configs, configured.schedulers, strict=True):
            groups = configured.param_groups[_index(trainer.optimizers, config.scheduler.optimizer)]
            change = _rebuild(config.scheduler, state, groups, trainer.global_step)
            if change:
                changes.append(change)
        if changes:
            rank_zero_info(
                f"Resumed at step {trainer.global_step} with this run's settings: "
                f"{'; '.join(changes)}."
            )


def _index(optimizers: list[Any], optimizer: Any) -> int:
    return next(i for i, candidate in enumerate(optimizers) if candidate is optimizer)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # values without a plain comparison count as changed
        return False


def _apply_settings(
    optimizer: Any, configured: list[dict[str, Any]], skip: tuple[str, ...]
) -> list[str]:
    """Set each restored optimizer setting that differs from this run's config to the
    config's value; return what changed."""
    changes = []
    name = type(optimizer).__name__
    for index, (group, settings) in enumerate(zip(optimizer.param_groups, configured, strict=True)):
        for key, value in settings.items():
            if key in skip or (key in group and _same(group[key], value)):
                continue
            where = f"{name} {key}" + (f" (group {index})" if len(configured) > 1 else "")
            changes.append(f"{where} {group.get(key)!r} -> {value!r}")
            group[key] = copy.deepcopy(value)
    return changes


def _rebuild(
    scheduler: Any, configured: dict[str, Any], groups: list[dict[str, Any]], step: int
) -> str | None:
    """Step this run's scheduler from step 0 to the restored one. Keep the restored state
    when that lands on the restored learning rates; else keep the rebuilt one and say so."""
    if isinstance(scheduler, ReduceLROnPlateau):
        return None
    optimizer = scheduler.optimizer
    restored = copy.deepcopy(scheduler.state_dict())
    restored_groups = [{k: g[k] for k in _SCHEDULED if k in g} for g in optimizer.param_groups]
    steps = int(restored.get("last_epoch", 0)) - int(configured.get("last_epoch", 0))
    scheduler.load_state_dict(copy.deepcopy(configured))
    for group, settings in zip(optimizer.param_groups, groups, strict=True):
        group.update({k: settings[k] for k in _SCHEDULED if k in settings})
    try:
        with warnings.catch_warnings():
            # "lr_scheduler.step() before optimizer.step()": stepping is all there is to do here.
            warnings.simplefilter("ignore")
            for _ in range(steps):
                scheduler.step()
    except Exception as error:
        name = type(scheduler).__name__
        raise UserError(
            f"This run's learning-rate schedule ({name}) cannot continue from the checkpoint's "
            f"step {step}: {error}. Make it reach at least that step (e.g. a larger "
            "`total_steps` for OneCycleLR), or resume with the original run's settings."
        ) from error
    rebuilt = [group["lr"] for group in optimizer.param_groups]
    before = [group.get("lr") for group in restored_groups]
    if all(_same(a, b) for a, b in zip(rebuilt, before, strict=True)):
        scheduler.load_state_dict(restored)
        for group, values in zip(optimizer.param_groups, restored_groups, strict=True):
            group.update(values)
        return None
    shown = ", ".join(f"{a:.6g} -> {b:.6g}" for a, b in zip(before, rebuilt, strict=True))
    return (
        f"{type(scheduler).__name__} rebuilt over this run's horizon from scheduler step "
        f"{steps} (lr {shown})"
    )
