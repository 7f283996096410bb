"""Run: the Trainer does the work; a signal stops it cleanly, between two batches.

Everything was checked and built before; what is returned is the Trainer's
``callback_metrics`` (still tensors: `record.finish` turns them into floats once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..distributed import is_rank_zero
from ..reliability.signals import stop_cleanly_on_signals

if TYPE_CHECKING:
    from .build import Job


def best_checkpoint(callbacks: list[Any]) -> str:
    """The best model's file: the monitored checkpoint callback's (`last_checkpoint` has no
    monitor); "" when there is none."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    checkpoint = next(
        (cb for cb in callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor), None
    )
    return checkpoint.best_model_path if checkpoint is not None else ""


def fit_and_test(job: Job, fit: bool = True, test: bool = True) -> dict[str, Any]:
    """Fit (resuming from ``job.ckpt_path``), then test the best checkpoint.

    SIGTERM or Ctrl-C during the run saves ``last.ckpt`` and exits 128 + the signal number
    with the command that resumes it (`reliability/signals.py`).
    """
    metrics: dict[str, Any] = {}
    with stop_cleanly_on_signals(job.output_dir, announce=is_rank_zero()):
        if fit:
            job.trainer.fit(job.model, datamodule=job.datamodule, ckpt_path=job.ckpt_path)
            metrics.update(job.trainer.callback_metrics)
        if test:
            best = best_checkpoint(job.callbacks)
            if fit and not best:
                print(
                    "No best checkpoint was saved; testing the weights as they are at the end "
                    "of training."
                )
            job.trainer.test(job.model, datamodule=job.datamodule, ckpt_path=best or None)
            metrics.update(job.trainer.callback_metrics)
    return metrics


def test(job: Job) -> dict[str, Any]:
    """Test the job's model as it is (eval.py: a model loaded from its checkpoint)."""
    job.trainer.test(job.model, datamodule=job.datamodule)
    return dict(job.trainer.callback_metrics)
