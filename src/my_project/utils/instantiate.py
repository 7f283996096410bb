"""Build Lightning objects from the composed config."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def instantiate_group(cfg: DictConfig | None) -> list[Any]:
    """Instantiate every entry of a dict-of-configs group (callbacks, loggers); skip nulls.

    An entry whose factory returns None (e.g. the progress bar when disabled) is skipped too.
    """
    from hydra.utils import instantiate

    if not cfg:
        return []
    built = (instantiate(entry) for entry in cfg.values() if entry and "_target_" in entry)
    return [obj for obj in built if obj is not None]
