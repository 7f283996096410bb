"""Check: every check of a run, in one place, before anything is written.

A mistake found here is one paragraph and exit status 2 (a :class:`~..errors.UserError`),
instead of a traceback from deep inside torch or Lightning, or a failure after the run
directory, the loggers and the first checkpoints exist. The entry points call two functions:

- :func:`check_config`, on the composed config alone: interpolations, value types and ranges, trainer
  values, accelerator/devices/strategy, the checkpoint path (and a warning when the config
  validates nothing);
- :func:`check_built`, on the built objects, before the Trainer runs them: the checkpoint
  against the model (and the epochs it trained against those asked for), the training data
  against the batch size;
- `dry_run`: what would fail only once training runs (a schedule, a validation interval, a
  layer of size 0), tried on the built objects; the entry points call it inside
  `run.refusals.built_from`, which names the config key to blame.

Each topic is a module of its own: `values`, `devices`, `checkpoint`, `data`, `loggers`,
`dry_run`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability.resume import resolve_checkpoint_path
from .checkpoint import (
    check_checkpoint_matches,
    check_checkpoint_path,
    check_resumed_progress,
    read_checkpoint,
)
from .data import check_training_data
from .devices import check_devices, check_nodes_launched, strategy_names
from .loggers import check_logger_settings
from .values import (
    check_config_resolves,
    check_config_types,
    check_global_groups,
    check_group_entries,
    check_trainer_types,
    check_value_ranges,
    nothing_validated_warning,
)

__all__ = [
    "check_built",
    "check_config",
    "check_devices",
    "check_trainer_types",
    "strategy_names",
]


def check_config(cfg: DictConfig, *, checkpoint_required: bool = False) -> str | None:
    """The checks that need only the config; return the checkpoint path, resolved.

    ``checkpoint_required``: eval and predict need ``ckpt_path``; train may resume from one
    (``ckpt_path=last`` is resolved here).
    """
    check_config_resolves(cfg)
    check_trainer_types(cfg.trainer)
    check_devices(cfg.trainer)
    check_nodes_launched(cfg.trainer)
    output_dir = Path(cfg.paths.output_dir)
    # `ckpt_path: ???` (eval, predict) reads as None here: the message below says what to pass.
    requested = OmegaConf.select(cfg, "ckpt_path")
    ckpt_path = check_checkpoint_path(resolve_checkpoint_path(requested, output_dir))
    if checkpoint_required and ckpt_path is None:
        script = cfg.get("task_name", "eval")
        raise UserError(
            f"{script} needs a checkpoint: `python {script}.py ckpt_path=PATH/TO/best.ckpt`."
        )
    if ckpt_path is not None:
        checkpoint = read_checkpoint(ckpt_path)
        if not checkpoint_required and cfg.get("train", True):
            check_resumed_progress(
                ckpt_path,
                checkpoint,
                OmegaConf.select(cfg, "trainer.max_epochs"),
                OmegaConf.select(cfg, "trainer.max_steps"),
            )
    check_global_groups(cfg)
    check_group_entries(cfg)
    check_config_types(cfg)
    check_value_ranges(cfg)
    check_logger_settings(cfg.get("logger"))
    warning = None if checkpoint_required else nothing_validated_warning(cfg)
    if warning and is_rank_zero():
        print(f"\n{warning}\n", file=sys.stderr, flush=True)
    return ckpt_path


def check_built(
    model: Any, datamodule: Any, ckpt_path: str | None, training: bool
) -> dict[str, Any]:
    """The checks that need the built model and data. Returns the checkpoint's training
    progress (``epoch``, ``global_step``, ``epochs_done``; empty without a checkpoint)."""
    resumed = check_checkpoint_matches(ckpt_path, model) if ckpt_path else {}
    if training:
        check_training_data(datamodule)
    return resumed
