"""Run directories that never collide, even for runs started in the same microsecond.

``${unique_dir:PATH}`` (configs/hydra/default.yaml) creates ``PATH``, or ``PATH_1``, ``PATH_2``...
if it exists, with ``os.mkdir``, which fails rather than reuse a directory another process
just created: two runs can never share one. The result is remembered, so every later lookup
in this process (Hydra resolves the run directory more than once) gives the same directory.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from omegaconf import OmegaConf

_created: dict[str, str] = {}


def unique_dir(prefix: str) -> str:
    """Create and return ``prefix`` or the first free ``prefix_N``."""
    if prefix in _created:
        return _created[prefix]
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count():
        candidate = prefix if n == 0 else f"{prefix}_{n}"
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        _created[prefix] = candidate
        return candidate
    raise AssertionError("unreachable")


def register_resolvers() -> None:
    """Make ``${unique_dir:...}`` available to the configs (idempotent)."""
    OmegaConf.register_new_resolver("unique_dir", unique_dir, use_cache=True, replace=True)
