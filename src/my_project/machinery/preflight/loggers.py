"""Settings under `logger.wandb` that wandb does not take, named without their value.

Lightning's ``WandbLogger`` hands every unknown keyword to ``wandb.init``, which fails late (when
the logger first logs, after the run directory exists), and Hydra then prints the whole command
line, the value included: often a credential (``+logger.wandb.api_key=...``).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from typing import Any

from ..errors import UserError
from ..reliability.secrets import looks_secret

_WANDB_TARGETS = (
    "my_project.machinery.loggers.wandb.wandb_logger",
    "lightning.pytorch.loggers.WandbLogger",
    "lightning.pytorch.loggers.wandb.WandbLogger",
    "pytorch_lightning.loggers.WandbLogger",
)


def check_logger_settings(loggers: Mapping[str, Any] | None) -> None:
    """Every key of a wandb logger entry is one that this project's factory, Lightning's
    WandbLogger or `wandb.init` takes; else a UserError naming the key."""
    for name, entry in (loggers or {}).items():
        if not isinstance(entry, Mapping) or entry.get("_target_") not in _WANDB_TARGETS:
            continue
        import wandb
        from lightning.pytorch.loggers import WandbLogger

        from ..loggers.wandb import wandb_logger

        functions = (wandb_logger, WandbLogger.__init__, wandb.init)
        accepted = {p for f in functions for p in inspect.signature(f).parameters}
        accepted -= {"self", "kwargs"}
        unknown = sorted(k for k in entry if not str(k).startswith("_") and k not in accepted)
        if not unknown:
            continue
        where = f"logger.{name}.{unknown[0]}"
        if looks_secret(unknown[0]):
            raise UserError(
                f"`{where}` is not a setting of the wandb logger, and credentials do not belong "
                "in the config: run `wandb login` once, or set the WANDB_API_KEY environment "
                f"variable. Remove `{where}` from the command line or the config."
            )
        close = difflib.get_close_matches(unknown[0], sorted(accepted), n=1)
        hint = f" Did you mean `logger.{name}.{close[0]}`?" if close else ""
        raise UserError(
            f"`{where}` is not a setting of the wandb logger (Lightning's WandbLogger or "
            f"wandb.init).{hint} Its settings: {', '.join(sorted(accepted))}."
        )
