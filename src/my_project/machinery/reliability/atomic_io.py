"""Checkpoint files: never half-written, verified before use, holding only plain data.

- Atomic: written to a temporary file beside the target (Lightning's goes through the system
  temp directory, often another filesystem, where the final move is a copy ``kill -9`` can cut
  short), fsynced, ``os.replace``d over it. The temporary name ends in ``.part``, never taken for
  a checkpoint; the next save removes one a killed writer left.
- Verified: every entry of ``torch.save``'s zip carries its CRC-32, which ``torch.load`` never
  checks; :func:`damage` does, once for each version of a file in a process.
- Plain: hyperparameters are saved as data ``torch.load(weights_only=True)`` reads
  (:func:`plain`), secrets masked.
"""

from __future__ import annotations

import contextlib
import functools
import os
import zipfile
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.plugins.io import TorchCheckpointIO

from .secrets import MASK, secret_values

_PARTIAL_PREFIX = ".partial-"


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, fsync, rename over ``path``."""
    path = atomic_write(path, lambda handle: torch.save(obj, handle))
    for stale in path.parent.glob(f"{_PARTIAL_PREFIX}*"):  # what a killed save left
        with contextlib.suppress(OSError):
            stale.unlink()
    return path


def atomic_write(path: str | Path, write: Callable[[BinaryIO], Any]) -> Path:
    """``write(handle)`` into a temporary file beside ``path`` (``.partial-*.part``), fsync,
    rename over ``path``: ``path`` is whole or as it was. A write that fails (a full disk, a
    read-only one) leaves no temporary file, or leaves it only where the disk refuses even
    its removal, and raises what the write raised."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{path.name}.part"
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the error to show is the write's, not this one
            tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path``, whole or not at all (:func:`atomic_write`)."""
    return atomic_write(path, lambda handle: handle.write(text.encode()))


def damage(path: str | Path) -> str | None:
    """What is wrong with the checkpoint file ``path``; None when every entry of its zip matches
    its CRC."""
    stat = os.stat(path)
    return _damage(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


@functools.cache
def _damage(path: str, *_version: int) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except Exception as error:  # BadZipFile, zlib.error, a truncated file
        return f"it is truncated, or not a whole zip archive ({type(error).__name__}: {error})"
    if bad is None:
        return None
    return f"its entry {bad} fails its CRC check (a changed byte would change every result)"


_PLAIN = (type(None), bool, int, float, complex, bytes, torch.dtype, torch.device, torch.Size)


def plain(value: Any, secrets: set[str]) -> Any:
    """``value`` as data ``torch.load(weights_only=True)`` reads, a string holding one of
    ``secrets`` masked: OmegaConf containers as lists and dicts, a class as its name, an object
    as a record, ``{"_object_": its class, ...}`` (a Hydra ``_partial_`` factory with its
    arguments, an enum or a path with its value), from which nothing is ever built."""
    from omegaconf import Container, OmegaConf

    if type(value) is str:
        return MASK if any(secret in value for secret in secrets) else value
    if type(value) in _PLAIN or isinstance(value, torch.Tensor):
        return value
    if type(value).__module__ == "numpy":  # a numpy scalar or array
        return value.tolist()
    if isinstance(value, Container):
        return plain(OmegaConf.to_container(value, resolve=True), secrets)
    if isinstance(value, dict):
        return {plain(key, set()): plain(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) and not isinstance(value, Enum):
        kind = list if isinstance(value, list) else tuple if isinstance(value, tuple) else set
        return kind(plain(item, secrets) for item in value)
    if isinstance(value, type):
        return _name(value)
    if isinstance(value, functools.partial):
        args = {"_args_": list(value.args)} if value.args else {}
        record = {"_object_": _name(value.func), "_partial_": True, **args, **value.keywords}
        return plain(record, secrets)
    if isinstance(value, (Enum, os.PathLike)):
        given = value.value if isinstance(value, Enum) else os.fspath(value)
        return {"_object_": _name(type(value)), "_args_": [plain(given, secrets)]}
    return {"_object_": _name(type(value))}


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, with the local save above (remote paths, ``s3://``...,
    keep Lightning's) and plain hyperparameters, secrets masked."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        secrets = secret_values()
        checkpoint = {  # hyper_parameters, hparams_type, datamodule_hyper_parameters...
            key: plain(value, secrets) if "hparams" in key or "hyper_param" in key else value
            for key, value in checkpoint.items()
        }
        if not isinstance(get_filesystem(path), LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        atomic_torch_save(checkpoint, path)
