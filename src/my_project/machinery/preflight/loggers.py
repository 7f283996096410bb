"""Settings under a wandb logger that wandb does not take, named without their value.

Lightning's ``WandbLogger`` hands unknown keywords to ``wandb.init``, which fails only once the
run directory exists, and Hydra then prints the value: often a credential (``api_key=...``).
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
from collections.abc import Mapping
from typing import Any

from ..errors import UserError
from ..reliability.secrets import looks_secret


def check_logger_settings(loggers: Mapping[str, Any] | None) -> None:
    """Every key of a wandb logger entry is one its ``_target_`` or `wandb.init` takes."""
    for name, entry in (loggers or {}).items():
        target = entry.get("_target_") if isinstance(entry, Mapping) else None
        if not isinstance(target, str) or "wandb" not in target.lower():
            continue
        import wandb
        from hydra.utils import get_object
        from lightning.pytorch.loggers import WandbLogger

        functions: list[Any] = [WandbLogger, wandb.init]
        with contextlib.suppress(Exception):  # an unimportable target: the build refuses it
            functions.append(get_object(target))
        accepted = {p for f in functions for p in inspect.signature(f).parameters}
        accepted -= {"self", "kwargs"}
        unknown = sorted(k for k in entry if not str(k).startswith("_") and k not in accepted)
        if not unknown:
            continue
        close = difflib.get_close_matches(unknown[0], sorted(accepted), n=1)
        hint = f". Did you mean `logger.{name}.{close[0]}`?" if close else "."
        if looks_secret(unknown[0]):
            hint = (
                ", and credentials do not belong in the config: run `wandb login` once, or set "
                "the WANDB_API_KEY environment variable."
            )
        raise UserError(f"`logger.{name}.{unknown[0]}` is not a setting of the wandb logger{hint}")
