"""Secrets (API keys, tokens, passwords) never reach the screen or the run directory.

A config key or environment variable "looks secret" when its name has a word such as
``token``, ``secret``, ``password`` or a pair such as ``api_key``. Their values become ``***``
in what the run prints and saves, whatever their length: by key name in structured data (the
config, logged hyperparameters) and in text wherever the key names the value (``+hf_token=...``,
``hf_token: ...``, ``'api_key': '...'``). Values long enough not to be ordinary words are also
masked wherever else they turn up: this run's secret config values of at least 6 characters,
secret-looking environment variables (``WANDB_API_KEY``) of at least 8. Only omegaconf is
imported here.
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
# Shorter values are too likely to be ordinary words ("test" would mask every "test/acc"); they
# are masked where their key names them. Environment variables are not chosen for this run.
_MIN_CONFIG_SECRET_LENGTH = 6
_MIN_ENV_SECRET_LENGTH = 8
_registered: set[str] = set()
# `key=value` (overrides), `key: value` (YAML), `'key': 'value'` (reprs): the value is a quoted
# string or runs to the next blank, comma, quote, backtick or closing bracket.
_KEY = re.compile(r"""(?P<key>['"]?[+~]*[A-Za-z_][\w.\-/]*['"]?)(?P<sep>[ \t]*[=:][ \t]*)""")
_VALUE = re.compile(r"""'[^'\n]*'|"[^"\n]*"|[^\s,'"`\]\}\)]+""")


@functools.lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """`WANDB_API_KEY`, `hf_token`, `dbPassword` do; `max_tokens`, `key_dim` do not."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    words = [w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w]
    return bool(_SECRET_WORDS & set(words)) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


def secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values to hide wherever they occur (see the module docstring)."""
    environ = os.environ if environ is None else environ
    found = {v for k, v in environ.items() if looks_secret(k) and len(v) >= _MIN_ENV_SECRET_LENGTH}
    return found | {v for v in _registered if len(v) >= _MIN_CONFIG_SECRET_LENGTH}


def _mask_keyed_values(text: str) -> str:
    """Every value a secret-looking key names, masked at any length; a key that is not secret
    does not hide what follows it (`override_dirname: +hf_token=...`)."""
    out, pos = [], 0
    while (key := _KEY.search(text, pos)) is not None:
        value = _VALUE.match(text, key.end())
        name = key["key"].strip("'\"").lstrip("+~").split(".")[-1].split("/")[-1]
        bare = value[0].strip("'\"") if value else ""
        # An interpolation (`${oc.env:HF_TOKEN}`) is where the secret comes from, not the secret.
        if value is None or not looks_secret(name) or bare in ("", MASK) or "${" in bare:
            out.append(text[pos : key.end()])
            pos = key.end()
            continue
        # After a colon (YAML, a repr) a bare *** would read as a YAML alias: quote it.
        quote = value[0][0] if value[0][0] in "'\"" else ("'" if ":" in key["sep"] else "")
        out.append(f"{text[pos : key.end()]}{quote}{MASK}{quote}")
        pos = value.end()
    out.append(text[pos:])
    return "".join(out)


def mask_text(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every value its key names as secret masked, then every secret value
    (longest first, so a secret that contains another is replaced whole)."""
    text = _mask_keyed_values(text)
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


def secret_override_values(overrides: Iterable[str]) -> list[str]:
    """Values of command-line overrides such as `+logger.wandb.api_key=...`."""
    split = (override.partition("=") for override in overrides)
    return [v.strip("'\"") for k, sep, v in split if sep and looks_secret(k.split(".")[-1])]


def protect_run_secrets(resolved: Mapping[str, Any]) -> None:
    """Register this run's secret values (those under secret-looking keys of the resolved
    config, and of command-line overrides): from now on they are masked wherever this project
    prints or saves. Hydra's record of the run (`.hydra/`), already written, is rewritten."""
    from hydra.core.hydra_config import HydraConfig

    from ..distributed import is_rank_zero

    values = secret_config_values(resolved)
    hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
    values += secret_override_values(hydra_cfg.overrides.task if hydra_cfg else [])
    _registered.update(str(v) for v in values if v is not None and str(v) not in ("", MASK))
    output_dir = hydra_cfg.runtime.get("output_dir") if hydra_cfg else None  # type: ignore[attr-defined]
    if hydra_cfg and hydra_cfg.output_subdir is not None and output_dir and is_rank_zero():
        for path in (Path(output_dir) / hydra_cfg.output_subdir).rglob("*"):
            if path.is_file() and path.suffix in (".yaml", ".yml", ".log", ".txt", ".json"):
                text = path.read_text(errors="replace")
                if (masked := mask_text(text)) != text:
                    path.write_text(masked)


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


class MaskedStream:
    """A text stream that masks secrets in everything written to it (see :func:`mask_stderr`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_stderr() -> None:
    """Mask secrets in whatever is written to stderr from now on (idempotent): error messages
    are where secrets escape (Hydra prints a failed job's overrides, a traceback a value)."""
    if not isinstance(sys.stderr, MaskedStream):
        sys.stderr = MaskedStream(sys.stderr)
