"""Check: what the config alone shows to be wrong, before anything is built or written.

:func:`check_config` runs once a job (a mistake is a :class:`~..errors.UserError`). The checks
that need the built objects (`contract`, `data`, `schedules`) run while `run/build.py` builds.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError
from ..reliability.resume import resolve_checkpoint_path
from ..reliability.secrets import protect_run_secrets
from .added_keys import check_added_keys_are_read
from .checkpoint import (
    check_checkpoint_path,
    check_resumed_progress,
    forget_notes,
    read_checkpoint,
)
from .devices import check_devices, check_nodes_launched
from .loggers import check_logger_settings
from .monitor import check_callback_monitors
from .values import check_config_resolves, check_trainer_types, check_values

__all__ = ["check_config", "check_devices", "check_trainer_types"]


def check_config(cfg: DictConfig, *, checkpoint_required: bool = False) -> str | None:
    """The checks that need only the config; return the checkpoint path, ``last`` resolved."""
    forget_notes()
    resolved = check_config_resolves(cfg)
    protect_run_secrets(resolved)  # before any message could show one
    check_added_keys_are_read(cfg)
    check_callback_monitors(cfg)
    trainer = resolved.get("trainer") or {}
    check_devices(trainer)
    check_nodes_launched(trainer)
    requested = OmegaConf.select(cfg, "ckpt_path")
    model = OmegaConf.select(cfg, "model._target_", throw_on_resolution_failure=False)
    ckpt_path = check_checkpoint_path(
        resolve_checkpoint_path(requested, Path(cfg.paths.output_dir), model)
    )
    if checkpoint_required and ckpt_path is None:
        script = cfg.get("task_name", "eval")
        raise UserError(
            f"{script} needs a checkpoint: `python {script}.py "
            "ckpt_path=logs/train/runs/<run>/checkpoints/last.ckpt`."
        )
    if ckpt_path is not None:
        checkpoint = read_checkpoint(ckpt_path)
        if not checkpoint_required and cfg.get("train", True):
            check_resumed_progress(ckpt_path, checkpoint, trainer, model)
    check_values(cfg, resolved)
    check_logger_settings(resolved.get("logger"))
    return ckpt_path
