"""Secrets (API keys, tokens, passwords) never reach the screen or the run directory.

A key "looks secret" when its name has a word such as ``token`` or a pair such as ``api_key``.
Structured data (the config, hyperparameters, Hydra's `.hydra/` record) has such keys' values
replaced by ``***``; text (stderr, wandb's record of the command line) has this run's secret
values replaced wherever they occur: those under secret-looking keys of its config (3
characters or more) and secret-looking environment variables (8 or more).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

MASK = "***"
_SECRET_WORDS = {"password", "passwd", "passphrase", "secret", "secrets", "token", "apikey"}
_SECRET_WORDS |= {"credential", "credentials"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("auth", "key")}
_MIN_LENGTH, _MIN_ENV_LENGTH = 3, 8
_registered: set[str] = set()


@functools.lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """`WANDB_API_KEY`, `hf_token`, `dbPassword` do; `max_tokens`, `key_dim` do not."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    words = [w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w]
    return bool(_SECRET_WORDS & set(words)) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


def secret_values() -> set[str]:
    """The values to hide wherever they occur (see the module docstring)."""
    env = {v for k, v in os.environ.items() if looks_secret(k) and len(v) >= _MIN_ENV_LENGTH}
    return env | _registered


def mask_text(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every secret value masked (longest first: one inside another goes whole)."""
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
    return mask_text(data, values) if isinstance(data, str) else data


def secret_config_values(data: Any) -> list[Any]:
    """Values stored under secret-looking keys anywhere in plain config data."""
    if isinstance(data, list):
        return [value for item in data for value in secret_config_values(item)]
    if not isinstance(data, Mapping):
        return []
    found: list[Any] = []
    for key, value in data.items():
        if looks_secret(str(key)) and not isinstance(value, (Mapping, list)):
            found.append(value)
        else:
            found.extend(secret_config_values(value))
    return found


def protect_run_secrets(resolved: Mapping[str, Any]) -> None:
    """Register this run's secret values (under secret-looking keys of the resolved config, the
    command line's included): from now on they are masked wherever this project prints or
    saves. Hydra's record of the run (`.hydra/*.yaml`), already written, is masked too."""
    import yaml
    from hydra.core.hydra_config import HydraConfig

    from ..distributed import is_rank_zero

    hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
    values = secret_config_values(resolved)
    _registered.update(str(v) for v in values if v is not None and len(str(v)) >= _MIN_LENGTH)
    _registered.discard(MASK)
    output_dir = hydra_cfg.runtime.get("output_dir") if hydra_cfg else None  # type: ignore[attr-defined]
    if hydra_cfg is None or hydra_cfg.output_subdir is None or not output_dir or not is_rank_zero():
        return
    record = Path(output_dir) / hydra_cfg.output_subdir
    for path in record.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        if (masked := mask_secrets(data)) != data:
            path.write_text(yaml.safe_dump(masked, sort_keys=False))


@contextmanager
def masked_argv() -> Iterator[None]:
    """`sys.argv` with secrets masked, for code that records the command line (wandb.init
    stores it in the run's metadata); restored after, since DDP relaunches from it. After it,
    stdout and stderr are masked ahead of what that code hooked into them (:func:`mask_stdio`)."""
    original = list(sys.argv)
    sys.argv[:] = [mask_text(arg) for arg in original]
    try:
        yield
    finally:
        sys.argv[:] = original
        mask_stdio()


class MaskedStream:
    """A text stream that masks secrets in everything written to it (see :func:`mask_stderr`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_stdio() -> None:
    """Mask secrets in whatever is written to stdout and stderr from now on, before anything
    that hooked their ``write`` sees it: wandb's console capture (its ``output.log`` and
    ``run-*.wandb``) patches the streams' ``write`` as it starts, behind our masking, and keeps
    in clear what any library prints (Lightning's hint repeats the whole command line)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        hooked = "write" in getattr(stream, "__dict__", {})
        if stream is not None and (hooked or not isinstance(stream, MaskedStream)):
            setattr(sys, name, MaskedStream(stream))


def mask_stderr() -> None:
    """Mask secrets in whatever is written to stderr from now on (idempotent): error messages
    are where secrets escape (Hydra prints a failed job's overrides, a traceback a value)."""
    if not isinstance(sys.stderr, MaskedStream):
        sys.stderr = MaskedStream(sys.stderr)
