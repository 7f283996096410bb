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

``ReduceLROnPlateau`` follows a metric rather than a horizon: its restored state (the
reductions so far, its patience) is kept, and a learning rate this run's config changes is
applied on top of the reductions (config 0.01 -> 0.05 with the lr halved once: 0.025). Telling
a changed config from a reduction needs the settings the earlier run's config built: every
checkpoint holds them (this callback's state). A checkpoint without them keeps the restored
learning rate, and one line says so.
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
        self._earlier: list[list[dict[str, Any]]] | None = None  # the checkpoint's record

    def state_dict(self) -> dict[str, Any]:
        """The optimizer settings this run's config built (what a resume compares with)."""
        if self._configured is None:
            return {}
        return {"param_groups": _settings(self._configured.param_groups)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._earlier = state_dict.get("param_groups")

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
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
        configured, earlier, self._earlier = self._configured, self._earlier, None
        if configured is None or trainer.ckpt_path is None:
            return
        scheduled = {id(config.scheduler.optimizer) for config in trainer.lr_scheduler_configs}
        changes = []
        for optimizer, groups in zip(trainer.optimizers, configured.param_groups, strict=True):
            skip = _SCHEDULED if id(optimizer) in scheduled else ()
            changes += _apply_settings(optimizer, groups, skip)
        for config, state in zip(trainer.lr_scheduler_configs, configured.schedulers, strict=True):
            index = _index(trainer.optimizers, config.scheduler.optimizer)
            groups = configured.param_groups[index]
            if isinstance(config.scheduler, ReduceLROnPlateau):
                previous = earlier[index] if earlier and index < len(earlier) else None
                changes += _on_plateau(config.scheduler, groups, previous)
                continue
            change = _rebuild(config.scheduler, state, groups, trainer.global_step)
            if change:
                changes.append(change)
        if changes:
            rank_zero_info(
                f"Resumed at step {trainer.global_step} with this run's settings: "
                f"{'; '.join(changes)}."
            )


def _settings(param_groups: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The plain values of the settings (numbers, strings, tuples, tensors): what a checkpoint
    loaded with ``weights_only=True`` holds."""
    plain = (int, float, str, bool, tuple, torch.Tensor, type(None))
    return [
        [{k: v for k, v in group.items() if isinstance(v, plain)} for group in groups]
        for groups in param_groups
    ]


def _on_plateau(
    scheduler: ReduceLROnPlateau,
    configured: list[dict[str, Any]],
    earlier: list[dict[str, Any]] | None,
) -> list[str]:
    """A learning rate this run's config changed, applied on top of the plateau's
    reductions so far (its state stays restored); one line each."""
    optimizer, changes = scheduler.optimizer, []
    name = type(optimizer).__name__
    for index, (group, settings) in enumerate(zip(optimizer.param_groups, configured, strict=True)):
        where = f"{name} lr" + (f" (group {index})" if len(configured) > 1 else "")
        new, restored = settings.get("lr"), group["lr"]
        old = earlier[index].get("lr") if earlier and index < len(earlier) else None
        if old is None:  # no record: a change and a reduction look alike
            if not _same(new, restored):
                changes.append(
                    f"{where}: ReduceLROnPlateau keeps the checkpoint's {restored!r}, not this "
                    f"run's {new!r} (the checkpoint does not record the lr its run configured, "
                    "so a reduction and a change cannot be told apart)"
                )
            continue
        if _same(old, new) or not old:
            continue
        group["lr"] = restored * new / old
        reduced = (
            ""
            if _same(restored, old)
            else f" (after ReduceLROnPlateau's reductions so far: {group['lr']:.6g})"
        )
        changes.append(f"{where} {old!r} -> {new!r}{reduced}")
    if changes:
        scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
    return changes


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
