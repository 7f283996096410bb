"""A `monitor` that names a validation metric the module does not log stops the run after
Lightning's sanity check, seconds in, instead of after the first epoch.

Lightning's ModelCheckpoint and EarlyStopping find out only when they first compare the
metric, once a whole training epoch has run, and stop with a traceback. The validation
metrics are known as soon as the sanity check has run a few validation batches; a
`monitor` named like a validation metric (``val/acc``, ``val_loss``) must be among them. A
monitored training metric is left to Lightning (it exists only once training has run).

With several validation loaders Lightning names each value per loader (``val_acc/dataloader_idx_0``)
and leaves ``trainer.callback_metrics`` empty after the sanity check, so the names are read from
what validation logged (its result collection), which holds them either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from ..errors import UserError
from ..plotting import split_metric_name
from .logged import logged_entries, logged_name, validation_results

if TYPE_CHECKING:
    from lightning.pytorch import LightningModule, Trainer


class MonitoredMetricIsLogged(Callback):
    def on_sanity_check_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logged = set(trainer.callback_metrics) | validation_names(trainer)  # alike on every rank
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            if not isinstance(callback, (ModelCheckpoint, EarlyStopping)):
                continue
            monitor = callback.monitor
            stage = split_metric_name(monitor) if monitor else None
            if monitor in logged or stage is None or stage[0] != "val":
                continue
            same = sorted(k for k in logged if split_metric_name(k) == stage)  # val/acc: val_acc
            example = (same or sorted(logged) or ["val_loss"])[0]
            raise UserError(
                f"`monitor={monitor}` ({type(callback).__name__}) names a validation metric the "
                f"module does not log; its validation logs {', '.join(sorted(logged)) or 'none'}."
                " Set `monitor` to the one that picks the best checkpoint (configs/train.yaml, "
                f"an experiment, or `monitor={example}` on the command line), with "
                "`monitor_mode=max` or `min`.",
                every_rank=True,
            )


def validation_names(trainer: Any) -> set[str]:
    """The epoch-level names of every value the sanity check's validation logged, with the
    ``/dataloader_idx_N`` suffix Lightning adds when there are several loaders (there
    ``trainer.callback_metrics`` stays empty until the first real validation)."""
    names: set[str] = set()
    for entry in logged_entries(validation_results(trainer)):
        if entry.meta.on_epoch:
            name = logged_name(entry)
            suffix = name[len(entry.meta.name) :]
            names |= {name, entry.meta.forked_name(False) + suffix}
    return names
