"""Run: the Trainer does the work (all was checked and built before); a signal stops it cleanly,
between two batches. What is returned is the Trainer's ``callback_metrics``, still tensors."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..distributed import is_rank_zero
from ..plotting import split_metric_name
from ..reliability import signals

if TYPE_CHECKING:
    from .build import Job


def fit_and_test(job: Job, fit: bool = True, test: bool = True) -> dict[str, Any]:
    """Fit (resuming from ``job.ckpt_path``), then test the best checkpoint. Resuming a run
    whose training had finished only tests; its train and val metrics stay those it recorded."""
    metrics: dict[str, Any] = {}
    with stops_cleanly(job, metrics):
        if fit:
            job.trainer.fit(job.model, datamodule=job.datamodule, ckpt_path=job.ckpt_path)
            metrics.update(earlier_metrics(job))
            metrics.update(job.trainer.callback_metrics)
        if test:
            # the monitored checkpoint callback's best file (`last_checkpoint` has no monitor)
            callbacks = job.trainer.checkpoint_callbacks
            best = next((c.best_model_path for c in callbacks if getattr(c, "monitor", None)), "")
            if fit and not best and is_rank_zero():
                print("No best checkpoint was saved; testing the weights as training left them.")
            job.trainer.test(job.model, datamodule=job.datamodule, ckpt_path=best or None)
            metrics.update(job.trainer.callback_metrics)
        signals.run_finished()  # a signal now lets the records be written, then says so
    return metrics


def earlier_metrics(job: Job) -> dict[str, Any]:
    """The train and val metrics a resumed run that trained no further step recorded."""
    steps, path = job.resumed.get("global_step"), job.output_dir / "metrics.json"
    if steps is None or job.trainer.global_step != steps or not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in recorded.items() if (split_metric_name(k) or ("",))[0] != "test"}


@contextmanager
def stops_cleanly(job: Job, fit_metrics: dict[str, Any]) -> Iterator[None]:
    """A stop by a signal as one message and exit status 128 + the signal number; the processes
    this one launched end with it. Stopped during the test, the training's metrics
    (``fit_metrics``) go to `metrics.json`, where a resume that only tests finds them."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from ..strategies.ddp import end_launched_job
    from . import record

    try:
        yield
    except (SIGTERMException, signals.StopRequested) as stop:
        signum = signals.requested_signal() or signal.SIGTERM
        # Stopped together in training, the other processes save with this one and exit by
        # themselves; stopped in the test, they may wait for this one in a collective.
        end_launched_job(succeeded=False, timeout=10.0 if isinstance(stop, SIGTERMException) else 0)
        if is_rank_zero():
            if fit_metrics:
                record.write_json(record.to_floats(fit_metrics), job.output_dir / "metrics.json")
            message = signals.stopped_message(signum, job.output_dir, bool(fit_metrics))
            print(f"\n{message}\n", file=sys.stderr, flush=True)
        sys.exit(128 + signum)


def test(job: Job) -> dict[str, Any]:
    """Test the job's model as it is (eval.py: a model loaded from its checkpoint)."""
    job.trainer.test(job.model, datamodule=job.datamodule)
    signals.run_finished()
    return dict(job.trainer.callback_metrics)
