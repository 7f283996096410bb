"""What a module logged with ``self.log``, and where: read from Lightning's result collections.

``trainer.callback_metrics`` holds values, not where they were logged, and with several
validation loaders it stays empty until the first real validation. Each loop's result
collection keeps an entry per logged name (its hook, ``on_step``/``on_epoch``, the loader),
also after its values were reset. These are Lightning internals (``_results``), read here in
one place with guards, for the monitored-metric check and the learning curves.
"""

from __future__ import annotations

from typing import Any

DATALOADER_SUFFIX = "/dataloader_idx_{}"


def logged_entries(results: Any) -> list[Any]:
    """The entries (``_ResultMetric``) of a result collection; [] without one."""
    if not results:
        return []
    return [entry for entry in results.values() if getattr(entry, "meta", None) is not None]


def logged_name(entry: Any) -> str:
    """The name Lightning gives an entry's epoch value in ``callback_metrics``:
    ``val_acc``, or ``val_acc/dataloader_idx_0`` with several loaders."""
    meta = entry.meta
    if meta.add_dataloader_idx and meta.dataloader_idx is not None:
        return meta.name + DATALOADER_SUFFIX.format(meta.dataloader_idx)
    return str(meta.name)


def training_results(trainer: Any) -> Any:
    return getattr(trainer.fit_loop.epoch_loop, "_results", None)


def validation_results(trainer: Any) -> Any:
    return getattr(getattr(trainer.fit_loop.epoch_loop, "val_loop", None), "_results", None)
