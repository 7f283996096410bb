"""Files every run leaves in its run directory besides checkpoints and logs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf


def to_floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Tensors and numbers to plain floats, keys sorted (one host sync, at the end of a run)."""
    return {key: float(value) for key, value in sorted(metrics.items())}


def write_json(data: Mapping[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def save_resolved_config(cfg: DictConfig, path: str | Path) -> Path:
    """The config with every interpolation resolved: what the run actually used (secrets masked)."""
    from ..reliability.secrets import mask_secrets

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OmegaConf.to_yaml(mask_secrets(OmegaConf.to_container(cfg, resolve=True))))
    return path
