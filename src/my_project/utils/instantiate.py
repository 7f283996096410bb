"""Build Lightning objects from the composed config."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def instantiate_group(cfg: DictConfig | None) -> list[Any]:
    """Instantiate every entry of a dict-of-configs group (callbacks, loggers); skip nulls."""
    from hydra.utils import instantiate

    if not cfg:
        return []
    return [instantiate(entry) for entry in cfg.values() if entry and "_target_" in entry]
