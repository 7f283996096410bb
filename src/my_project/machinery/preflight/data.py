"""The training data, prepared as Lightning will, checked against the batch size and the
validation interval before anything of the run is written."""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError


def check_training_data(
    datamodule: Any, trainer: Any, typed: Any = None
) -> tuple[int | None, int | None]:
    """``prepare_data``, ``setup("fit")`` and ``train_dataloader()`` with the Trainer attached;
    the batch size against the training split, named as ``typed`` (the config's
    `data.batch_size`), which a data module may divide among the processes as LHT's does.
    Returns an epoch's batches in one process and the training loader's batch size (``None``
    where either is unknown)."""
    datamodule.trainer = trainer
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batch_size = getattr(loader, "batch_size", None)
    try:
        size, batches = len(loader.dataset), len(loader)
    except (TypeError, AttributeError):
        return None, batch_size  # an iterable data set (or batches made otherwise): no length
    if size == 0:
        raise UserError("The training split is empty; check the data directory and fractions.")
    if batch_size is not None and batch_size > size:
        world = max(int(getattr(trainer, "world_size", 1) or 1), 1)
        raise UserError(_batch_over_split(batch_size, size, typed, world))
    batches = math.ceil(batches / max(trainer.world_size, 1))
    limit = trainer.limit_train_batches
    return int(batches * limit) if isinstance(limit, float) else min(batches, limit), batch_size


def _batch_over_split(batch_size: int, size: int, typed: Any, world: int) -> str:
    """The refusal of a batch larger than the training split, in the value the user typed: a
    data module that divides `data.batch_size` among the ``world`` processes (LHT's) makes
    smaller loader batches, and the typed value and its bounds scale with it."""
    scale = world if world > 1 and typed == batch_size * world else 1
    shown = typed if scale > 1 else batch_size
    per_process = (
        f" (the data module divides it among the {scale} processes: batches of {batch_size})"
        if scale > 1
        else ""
    )
    return (
        f"data.batch_size={shown}{per_process} is larger than the training split ({size} "
        f"examples), so every epoch would be a single short batch. Use "
        f"`data.batch_size={min(size, 64) * scale}` or another value up to {size * scale}."
    )


def check_validation_interval(trainer: Any, batches: int | None) -> None:
    """A `val_check_interval` in batches fits in one epoch, as Lightning requires once fit starts
    (unless `check_val_every_n_epoch` is null)."""
    interval = trainer.val_check_interval
    if batches is None or not isinstance(interval, int) or trainer.check_val_every_n_epoch is None:
        return
    if interval > batches:
        raise ValueError(
            f"val_check_interval={interval} asks to validate every {interval} training batches, "
            f"but an epoch has {batches}; Lightning requires at most one epoch. Use a number "
            f"up to {batches}, a fraction of an epoch (e.g. 0.5), or set "
            "`trainer.check_val_every_n_epoch=null` to count batches across epochs"
        )
