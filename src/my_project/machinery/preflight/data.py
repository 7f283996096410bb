"""The training data, prepared as Lightning will prepare it, and checked against the batch size
and the validation interval before anything of the run is written (a DataLoader refuses a bad
``batch_size`` or ``num_workers`` itself, once it is made)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError


def check_training_data(datamodule: Any, trainer: Any) -> int | None:
    """``prepare_data``, ``setup("fit")`` and ``train_dataloader()``, in Lightning's order, with
    the Trainer attached (a data module may read it); the batch size against the training split.
    Returns the training batches of an epoch in one process (None: the loader has no length)."""
    datamodule.trainer = trainer
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batch_size = getattr(loader, "batch_size", None)
    try:
        size, batches = len(loader.dataset), len(loader)
    except (TypeError, AttributeError):
        return None  # an iterable data set (or batches made by other means) has no length
    if size == 0:
        raise UserError("The training split is empty; check the data directory and fractions.")
    if batch_size is not None and batch_size > size:
        raise UserError(
            f"data.batch_size={batch_size} is larger than the training split ({size} examples), "
            f"so every epoch would be a single short batch. Use `data.batch_size={min(size, 64)}` "
            f"or another value up to {size}."
        )
    batches = math.ceil(batches / max(trainer.world_size, 1))
    limit = trainer.limit_train_batches
    return int(batches * limit) if isinstance(limit, float) else min(batches, limit)


def check_validation_interval(trainer: Any, batches: int | None) -> None:
    """A `val_check_interval` counted in batches fits in one epoch, as Lightning requires when
    fit starts (unless `check_val_every_n_epoch` is null: batches counted across epochs)."""
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
