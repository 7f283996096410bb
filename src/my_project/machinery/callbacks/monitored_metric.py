"""A `monitor` naming a validation metric the module does not log stops the run after the
sanity check in one paragraph, not after the first epoch with Lightning's traceback; nothing
has trained, so the run keeps nothing (`run/entry.py` removes its directory). Names come
from validation's result collection (``callback_metrics`` stays empty until the first real
validation with several loaders). A monitored training metric is left to Lightning.
"""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from .. import lightning_compat as compat
from ..errors import UserError
from ..plotting import split_metric_name


class MonitoredMetricIsLogged(Callback):
    def on_sanity_check_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logged = set(trainer.callback_metrics)  # alike on every rank
        for entry in compat.logged_entries(compat.validation_results(trainer)):
            if entry.meta.on_epoch:
                name = compat.logged_name(entry)
                logged |= {name, entry.meta.forked_name(False) + name[len(entry.meta.name) :]}
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            monitor = getattr(callback, "monitor", None)
            stage = split_metric_name(monitor) if monitor else None
            if not isinstance(callback, (ModelCheckpoint, EarlyStopping)) or monitor in logged:
                continue
            if stage is None or stage[0] != "val":
                continue
            same = sorted(k for k in logged if split_metric_name(k) == stage)  # val/acc: val_acc
            example = (same or sorted(logged) or ["val_loss"])[0]
            kind = ModelCheckpoint if isinstance(callback, ModelCheckpoint) else EarlyStopping
            raise UserError(  # Lightning's name: ours (MovableCheckpoint) is one
                f"`monitor={monitor}` ({kind.__name__}) names a validation metric the "
                f"module does not log; its validation logs {', '.join(sorted(logged)) or 'none'}."
                " Set `monitor` to the one that picks the best checkpoint (configs/train.yaml, "
                f"an experiment, or `monitor={example}` on the command line), with "
                "`monitor_mode=max` or `min`.",
                every_rank=True,
            )
