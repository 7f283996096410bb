"""What would fail only once training runs, tried on the built objects before anything is written.

Each function raises the object's own complaint (a plain exception, not a UserError): the
entry points call them inside `run.refusals.built_from`, which names the config key to blame.
Without them a learning-rate schedule dividing by zero (``model.scheduler.T_max=0``) stops the
run at the end of its first epoch, a validation interval longer than an epoch
(``+trainer.val_check_interval=1000``) when fit starts, and a layer of size 0
(``model.net.hidden=[0]``) trains to chance accuracy with only a torch warning; each leaving a
run directory behind.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

# Schedules are stepped as many times as the run will step them, up to this many (a
# schedule that fails later than that is left to the run itself).
_MAX_DRY_STEPS = 1000


def check_parameters(model: Any, sizes: Iterable[str] = ()) -> None:
    """No parameter of the model is empty (a layer of size 0): it would learn nothing, and
    the layers after it would see only zeros. ``sizes``: config keys set to 0, to name."""
    from torch.nn.parameter import UninitializedParameter

    empty = [
        (name, tuple(p.shape))
        for name, p in model.named_parameters()
        if not isinstance(p, UninitializedParameter) and p.numel() == 0
    ]
    if empty:
        name, shape = empty[0]
        suspects = ", ".join(f"`{key}`" for key in sizes)
        where = f" (the config's {suspects} holds a 0)" if suspects else ""
        raise ValueError(
            f"the model has a layer of size 0: its parameter {name} has shape {shape} and "
            f"no elements{where}; a layer needs at least one unit"
        )


def zero_sizes(config: Any, path: str) -> list[str]:
    """The names of keys under ``config`` whose value is 0 or a list holding a 0."""
    found: list[str] = []
    if isinstance(config, Mapping):
        for key, value in config.items():
            found += zero_sizes(value, str(key) if not path else f"{path}.{key}")
    elif _is_zero(config) or (
        isinstance(config, (list, tuple)) and any(_is_zero(v) for v in config)
    ):
        found.append(path.rsplit(".", 1)[-1])
    return found


def _is_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def try_schedules(
    model: Any, epochs: int | None, steps_per_epoch: int | None, max_steps: int | None
) -> None:
    """``configure_optimizers()``, then each learning-rate schedule stepped as often as the
    run will step it (at most; up to ``_MAX_DRY_STEPS``), on throwaway optimizers.

    ``epochs``: ``max_epochs`` (-1 or None: no limit); ``steps_per_epoch``: optimizer steps of
    an epoch, at least (None: unknown); ``max_steps``: -1 or None for no limit. Counting too few
    steps only tries less; never more than the run takes (``OneCycleLR`` refuses a step past its
    ``total_steps``). A ``configure_optimizers`` that needs the Trainer
    (``self.trainer.estimated_stepping_batches``) cannot run yet, nor one of a module that
    makes its layers in ``configure_model`` (they exist once fit calls it): both are left to
    the run.
    """
    from lightning.pytorch.core.optimizer import (
        _configure_optimizers,
        _configure_schedulers_automatic_opt,
        _configure_schedulers_manual_opt,
    )
    from lightning.pytorch.utilities.model_helpers import is_overridden

    if is_overridden("configure_model", model):
        return

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"
        try:
            configured = model.configure_optimizers()
        except RuntimeError as error:
            if "attached to a `Trainer`" in str(error):
                return
            raise
        if configured is None:
            return
        _, schedulers, monitor = _configure_optimizers(configured)
        if getattr(model, "automatic_optimization", True):
            configs = _configure_schedulers_automatic_opt(schedulers, monitor)
        else:
            configs = _configure_schedulers_manual_opt(schedulers)
        steps_limit = max_steps if max_steps is not None and max_steps >= 0 else None
        epochs = epochs if epochs is not None and epochs >= 0 else None
        if steps_limit is not None and steps_per_epoch:
            epoch_limit = math.ceil(steps_limit / steps_per_epoch)
            epochs = epoch_limit if epochs is None else min(epochs, epoch_limit)
        for config in configs:
            steps = _dry_steps(config, epochs, steps_per_epoch, steps_limit)
            scheduler: Any = config.scheduler
            for _ in range(steps):
                if config.reduce_on_plateau:
                    scheduler.step(0.0)  # a metric that never improves: the most it reduces
                else:
                    scheduler.step()


def _dry_steps(
    config: Any, epochs: int | None, steps_per_epoch: int | None, steps_limit: int | None
) -> int:
    """How often to step a schedule: as often as the run will, at most; once when unknown."""
    if config.interval == "step":
        per_epoch = None
        if epochs is not None and steps_per_epoch is not None:
            per_epoch = epochs * steps_per_epoch
        known = [t for t in (steps_limit, per_epoch) if t is not None]
    else:
        known = [epochs] if epochs is not None else []
    total = min([*known, _MAX_DRY_STEPS]) if known else 1
    return total // max(int(config.frequency or 1), 1)


def training_batches(loader: Any, trainer: Mapping[str, Any], world_size: int) -> int | None:
    """The training batches of one epoch in one process, as Lightning will count them
    (``limit_train_batches`` applied); None when the loader has no length."""
    try:
        batches = len(loader)
    except TypeError:
        return None
    batches = math.ceil(batches / max(world_size, 1))
    limit = trainer.get("limit_train_batches")
    if isinstance(limit, float):
        batches = int(batches * limit)
    elif isinstance(limit, int) and not isinstance(limit, bool):
        batches = min(batches, limit)
    return batches


def check_validation_interval(trainer: Mapping[str, Any], batches: int | None) -> None:
    """A `val_check_interval` counted in batches fits in one epoch (as Lightning requires when
    fit starts, unless `check_val_every_n_epoch` is null)."""
    interval = trainer.get("val_check_interval")
    if batches is None or not isinstance(interval, int) or isinstance(interval, bool):
        return
    if "check_val_every_n_epoch" in trainer and trainer["check_val_every_n_epoch"] is None:
        return
    if interval > batches:
        raise ValueError(
            f"val_check_interval={interval} asks to validate every {interval} training batches, "
            f"but an epoch has {batches}; Lightning requires at most one epoch. Use a number "
            f"up to {batches}, a fraction of an epoch (e.g. 0.5), or set "
            "`trainer.check_val_every_n_epoch=null` to count batches across epochs"
        )
