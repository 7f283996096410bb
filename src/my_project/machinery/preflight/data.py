"""The training data, prepared and checked against the batch size before training starts."""

from __future__ import annotations

from typing import Any

from ..errors import UserError


def check_training_data(datamodule: Any) -> None:
    """Prepare and set up the data now, and check the batch size against the training split."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batch_size = getattr(loader, "batch_size", None)
    # A DataLoader has a dataset; `data.on_device` batches (DeviceBatches) only a sampler.
    source = loader.dataset if hasattr(loader, "dataset") else getattr(loader, "sampler", None)
    try:
        size = len(source)  # type: ignore[arg-type]
    except TypeError:
        return  # an iterable data set has no length to compare with
    if size == 0:
        raise UserError("The training split is empty; check the data directory and fractions.")
    if batch_size is not None and batch_size > size:
        raise UserError(
            f"data.batch_size={batch_size} is larger than the training split ({size} "
            f"examples), so every epoch would be a single short batch. Use "
            f"`data.batch_size={min(size, 64)}` or another value up to {size}."
        )
