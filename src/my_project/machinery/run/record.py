"""Record: what a run leaves in its run directory besides checkpoints and logger files.

:func:`start`: the masked config (YAML, the printed tree, the loggers' hyperparameters);
:func:`finish`: ``metrics.json`` and ``run_info.json``; :func:`next_steps`: a training run's best
checkpoint and the commands that use it, ready to paste. Only global rank 0 writes.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from math import isfinite
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from ..config import print_config_tree, shown_path
from ..distributed import is_rank_zero
from ..reliability.resume import keep_csv_history, newest_checkpoint, quiet_own_checkpoints_warning
from ..reliability.secrets import masked_argv

if TYPE_CHECKING:
    from .build import Job


def to_floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Tensors and numbers to plain floats, keys sorted; a null (`write_json`'s) as NaN."""
    return {key: float("nan" if v is None else v) for key, v in sorted(metrics.items())}


def write_json(data: Mapping[str, Any], path: str | Path) -> Path:
    """``data`` as JSON, which has no NaN nor infinity: a non-finite number is written as null,
    said on stderr."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bad = [key for key, value in data.items() if isinstance(value, float) and not isfinite(value)]
    if bad:
        listed = ", ".join(f"{k}={data[k]}" for k in bad)
        print(f"Note: {listed} written as null to {path}.", file=sys.stderr)
    finite = {key: None if key in bad else value for key, value in data.items()}
    from ..reliability.atomic_io import atomic_write_text  # whole, or as it was

    return atomic_write_text(path, json.dumps(finite, indent=2, allow_nan=False) + "\n")


def run_config(ckpt_path: str | Path) -> DictConfig | None:
    """The config of the run that wrote ``ckpt_path`` (beside its checkpoints/), if it reads."""
    path = Path(ckpt_path).resolve().parent.parent / "config.yaml"
    try:
        config = OmegaConf.load(path) if path.is_file() else None
    except Exception:  # yaml's errors, a file that is not text: as if it were not there
        return None
    return config if isinstance(config, DictConfig) else None


def start(job: Job, save_config: bool = True) -> None:
    """``config_tree.log``, ``config.yaml`` and the loggers' hyperparameters; a resumed run first
    keeps its CSV log's rows up to the checkpoint (`resume.keep_csv_history`)."""
    if job.resumed.get("global_step"):
        keep_csv_history(job.loggers, job.resumed["logger_step"])
        quiet_own_checkpoints_warning(job.output_dir, job.callbacks)
    if is_rank_zero():  # the Trainer knows its rank only once it runs
        job.output_dir.mkdir(parents=True, exist_ok=True)
        print_config_tree(job.config, save_to=job.output_dir / "config_tree.log")
        if save_config:
            (job.output_dir / "config.yaml").write_text(OmegaConf.to_yaml(job.config))
    with masked_argv():  # the first log_hyperparams starts wandb, which records the command
        for logger in job.loggers:
            logger.log_hyperparams(job.config)


def finish(job: Job, metrics: Mapping[str, Any], run_info: bool = True) -> dict[str, float]:
    """``metrics.json`` and ``run_info.json`` (what the Trainer really ran on); print where the
    run is (easy to lose among Lightning's output)."""
    values = to_floats(metrics)
    if job.trainer.is_global_zero:
        write_json(values, job.output_dir / "metrics.json")
        if run_info:
            from ..devices.choice import run_record

            write_json(run_record(job.trainer), job.output_dir / "run_info.json")
        print(f"\nEverything this run wrote is in {shown_path(job.output_dir)}", flush=True)
    return values


def next_steps(job: Job) -> None:
    """A training run's best checkpoint (else its newest), its metrics, and the commands that
    use that checkpoint; not in a multirun (the sweep ends with a table of its runs)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.callbacks import ModelCheckpoint

    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    if not job.trainer.is_global_zero or multirun:
        return
    monitored = [cb for cb in job.callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor]
    best = next((cb for cb in monitored if cb.best_model_path), None)
    checkpoint = best.best_model_path if best else newest_checkpoint(job.output_dir)
    if not checkpoint:
        return
    score = best.best_model_score if best else None
    scored = f" ({best.monitor}={float(score):.4g})" if best and score is not None else ""
    print(f"  {'best' if best else 'last'} checkpoint: {shown_path(checkpoint)}{scored}")
    print(f"  metrics:         {shown_path(job.output_dir / 'metrics.json')}")
    print("Next steps, with that checkpoint:")
    for script in ("eval", "predict", "serve", "export"):
        print(f"  {command(script)} {shlex.quote(f'ckpt_path={shown_path(checkpoint)}')}")
    sys.stdout.flush()


def command(script: str) -> str:
    """How to run the entry point ``script`` as this one was run: `python eval.py` or the
    console script (`my-project-eval`)."""
    launched = Path(sys.argv[0])
    if launched.suffix == ".py" or "-" not in launched.name:
        return f"python {shlex.quote(shown_path(launched.with_name(f'{script}.py')))}"
    return f"{launched.name.rsplit('-', 1)[0]}-{script}"
