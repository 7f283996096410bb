"""Secrets (API keys, tokens, passwords) never reach the screen or the run directory.

A config key or environment variable "looks secret" when its name has a word such as
``token``, ``secret``, ``password`` or a pair such as ``api_key``. Their values are replaced by
``***`` in what the run prints and saves; values of secret-looking environment variables (e.g.
``WANDB_API_KEY``) are masked wherever else they turn up. Only omegaconf is imported here.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MASK = "***"
_SECRET_WORDS = {
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "apikey",
    "credential",
    "credentials",
}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("auth", "key")}
# Shorter values are too likely to be ordinary words or numbers to replace everywhere.
_MIN_SECRET_LENGTH = 8
_registered: set[str] = set()


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w]


def looks_secret(name: str) -> bool:
    """`WANDB_API_KEY`, `hf_token`, `dbPassword` do; `max_tokens`, `key_dim` do not."""
    words = _words(name)
    return bool(_SECRET_WORDS & set(words)) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


def register_secret_values(values: Iterable[Any]) -> None:
    """Values found in this run's config under secret-looking keys: mask them everywhere."""
    _registered.update(
        str(v) for v in values if v is not None and len(str(v)) >= _MIN_SECRET_LENGTH
    )


def secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values to hide: secret-looking environment variables plus registered ones."""
    environ = os.environ if environ is None else environ
    found = {v for k, v in environ.items() if looks_secret(k) and len(v) >= _MIN_SECRET_LENGTH}
    return found | _registered


def mask_text(text: str, values: Iterable[str] | None = None) -> str:
    # Longest first, so a secret that contains another is replaced whole.
    for value in sorted(secret_values() if values is None else values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def mask_secrets(data: Any, values: Iterable[str] | None = None) -> Any:
    """A copy of plain config data (dicts, lists, scalars) with secrets replaced by ``***``."""
    values = set(secret_values() if values is None else values)
    if isinstance(data, Mapping):
        return {
            key: MASK
            if looks_secret(str(key)) and value not in (None, "")
            else mask_secrets(value, values)
            for key, value in data.items()
        }
    if isinstance(data, (list, tuple)):
        return type(data)(mask_secrets(item, values) for item in data)
    if isinstance(data, str):
        return mask_text(data, values)
    return data


def secret_config_values(data: Any) -> list[Any]:
    """Values stored under secret-looking keys anywhere in plain config data."""
    found: list[Any] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            if looks_secret(str(key)) and not isinstance(value, (Mapping, list)):
                found.append(value)
            else:
                found.extend(secret_config_values(value))
    elif isinstance(data, list):
        for item in data:
            found.extend(secret_config_values(item))
    return found


def secret_override_values(overrides: Iterable[str]) -> list[str]:
    """Values of command-line overrides such as `+logger.wandb.api_key=...`."""
    found = []
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and looks_secret(key.split(".")[-1]):
            found.append(value)
    return found


def mask_files(folder: str | Path, values: Iterable[str] | None = None) -> None:
    """Rewrite the text files under ``folder`` (Hydra's `.hydra/`) with secrets masked."""
    values = set(secret_values() if values is None else values)
    if not values:
        return
    for path in Path(folder).rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".yml", ".log", ".txt", ".json"):
            text = path.read_text(errors="replace")
            masked = mask_text(text, values)
            if masked != text:
                path.write_text(masked)


def protect_run_secrets(cfg: Any) -> None:
    """Register this run's secret values and mask them in Hydra's saved `.hydra/` files.

    Values under secret-looking config keys and command-line overrides are masked from then
    on wherever this project prints or saves (config tree, config.yaml, hparams, checkpoints).
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    values = secret_config_values(OmegaConf.to_container(cfg, resolve=True))
    if not HydraConfig.initialized():
        register_secret_values(values)
        return
    hydra_cfg = HydraConfig.get()
    values += secret_override_values(hydra_cfg.overrides.task)
    register_secret_values(values)
    if hydra_cfg.output_subdir is not None:
        mask_files(Path(hydra_cfg.runtime.output_dir) / hydra_cfg.output_subdir)


@contextmanager
def masked_argv() -> Iterator[None]:
    """`sys.argv` with secrets masked, for code that records the command line (wandb.init
    stores it in the run's metadata); restored after, since DDP relaunches from it."""
    original = list(sys.argv)
    sys.argv[:] = [mask_text(arg) for arg in original]
    try:
        yield
    finally:
        sys.argv[:] = original
