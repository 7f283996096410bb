"""Settings under `logger.wandb` that wandb does not take, named without their value.

Lightning's ``WandbLogger`` hands every unknown keyword to ``wandb.init``, which fails late
(when the logger first logs, after the run directory exists) with a ``TypeError``, and Hydra
then prints the whole command line, the value included: often a credential
(``+logger.wandb.api_key=...``).
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


def wandb_settings() -> set[str]:
    """The keys a wandb logger entry may have: this project's factory's, Lightning's
    WandbLogger's and `wandb.init`'s."""
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    from ..loggers.wandb import wandb_logger

    accepted = set()
    for function in (wandb_logger, WandbLogger.__init__, wandb.init):
        accepted |= set(inspect.signature(function).parameters)
    return accepted - {"self", "kwargs"}


def check_logger_settings(loggers: Mapping[str, Any] | None) -> None:
    """Every key of a wandb logger entry is one wandb takes; else a UserError naming the key."""
    for name, entry in (loggers or {}).items():
        if not isinstance(entry, Mapping) or entry.get("_target_") not in _WANDB_TARGETS:
            continue
        accepted = wandb_settings()
        unknown = sorted(k for k in entry if not str(k).startswith("_") and k not in accepted)
        if unknown:
            raise UserError(_message(f"logger.{name}", unknown[0], accepted))


def _message(where: str, key: str, accepted: set[str]) -> str:
    if looks_secret(key):
        return (
            f"`{where}.{key}` is not a setting of the wandb logger, and credentials do not "
            "belong in the config: run `wandb login` once, or set the WANDB_API_KEY environment "
            f"variable. Remove `{where}.{key}` from the command line or the config."
        )
    close = difflib.get_close_matches(key, sorted(accepted), n=1)
    hint = f" Did you mean `{where}.{close[0]}`?" if close else ""
    return (
        f"`{where}.{key}` is not a setting of the wandb logger (Lightning's WandbLogger or "
        f"wandb.init).{hint} Its settings: {', '.join(sorted(accepted))}."
    )
