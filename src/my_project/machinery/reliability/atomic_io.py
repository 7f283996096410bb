"""Checkpoint files: never half-written, carrying their own digest, holding only plain data.

- Atomic: written to a temporary file beside the target, fsynced, ``os.replace``d over it, the
  directory fsynced. (Lightning's own "atomic" save goes through the system temp directory, often
  another filesystem, where the final move is a copy that ``kill -9`` can cut short.) The
  temporary name ends in ``.part``, so it is never taken for a checkpoint; the next save removes
  one a killed writer left (a run directory has one writer: `run_dir.RunDirLock`).
- Digest: the file's sha256 is written as the zip archive's comment (``torch.save`` writes a zip;
  its comment is its last bytes, renamed into place with the rest; ``unzip -z`` shows it).
  :func:`check_intact` verifies it, or the zip's CRCs in a checkpoint from elsewhere:
  ``torch.load`` checks neither, and reads flipped bytes as weights.
- Plain: hyperparameters are saved as data ``torch.load(weights_only=True)`` reads
  (:func:`plain`), secrets masked (``reliability/secrets.py``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import struct
import zipfile
from enum import Enum
from pathlib import Path
from typing import Any

import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.plugins.io import TorchCheckpointIO

from ..errors import UserError
from .secrets import MASK, secret_values

_PARTIAL_PREFIX = ".partial-"
_DIGEST = b"sha256:"
_COMMENT = len(_DIGEST) + 64  # the zip comment written here: "sha256:<64 hex digits>"
_SILENT = " (a changed byte in its weights would change every result, without an error)"


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, its digest added, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{path.name}.part"
    try:
        with open(tmp, "w+b") as handle:
            torch.save(obj, handle)
            end = handle.seek(-22, os.SEEK_END) + 20  # the zip's end record; its comment length
            record = handle.read(22)
            if record.startswith(b"PK\x05\x06") and record.endswith(b"\0\0"):  # no comment yet
                comment = _DIGEST + _sha256(handle, end).encode()
                handle.seek(end)
                handle.write(struct.pack("<H", len(comment)) + comment)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if os.name == "posix":
        folder = os.open(path.parent, os.O_RDONLY)
        os.fsync(folder)
        os.close(folder)
    for stale in path.parent.glob(f"{_PARTIAL_PREFIX}*"):  # what a killed save left
        with contextlib.suppress(OSError):
            stale.unlink()
    return path


def _sha256(handle: Any, length: int) -> str:
    """The sha256 of the first ``length`` bytes of the open file ``handle``."""
    digest, _ = hashlib.sha256(), handle.seek(0)
    while length > 0 and (chunk := handle.read(min(length, 1 << 22))):
        digest.update(chunk)
        length -= len(chunk)
    return digest.hexdigest()


def damage(path: str | Path) -> str | None:
    """What is wrong with the checkpoint file ``path``, None when it is intact: its digest
    (one this module wrote) or else its zip entries' CRCs (one from elsewhere) are checked,
    once for each version of the file in a process."""
    stat = os.stat(path)
    return _damage(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


@functools.cache
def _damage(path: str, size: int, _mtime: int, _inode: int) -> str | None:
    with open(path, "rb") as handle:
        handle.seek(max(size - _COMMENT - 2, 0))
        tail = handle.read()
        if tail[:2] == struct.pack("<H", _COMMENT) and tail[2:].startswith(_DIGEST):
            if _sha256(handle, size - _COMMENT - 2) == tail[2 + len(_DIGEST) :].decode():
                return None
            return f"its bytes do not match the sha256 digest written into it when saved{_SILENT}"
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except Exception as error:  # BadZipFile, zlib.error, a truncated file
        return f"it is truncated, or not a whole zip archive ({type(error).__name__}: {error})"
    return None if bad is None else f"its entry {bad} fails its CRC check{_SILENT}"


def check_intact(path: str | Path, what: str = "ckpt_path") -> None:
    """A UserError when ``path`` is damaged, naming the newest checkpoint beside it that is not."""
    problem = damage(path)
    if problem is None:
        return
    others = [p for p in Path(path).parent.glob("*.ckpt") if p.is_file() and p != Path(path)]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    intact = next((p for p in others if damage(p) is None), None)
    instead = (
        f"The newest checkpoint beside it that verifies is {intact}: pass `{what}={intact}`."
        if intact
        else "No checkpoint beside it verifies; retrain, or restore the file from a copy."
    )
    raise UserError(f"{what}={path} cannot be read as a checkpoint: {problem}. {instead}")


_PLAIN = (type(None), bool, int, float, complex, bytes, torch.dtype, torch.device, torch.Size)


def plain(value: Any, secrets: set[str]) -> Any:
    """``value`` as data ``torch.load(weights_only=True)`` reads (it unpickles no class it does
    not know), a string holding one of ``secrets`` masked: OmegaConf containers as lists and
    dicts, a class as its name, an object as a record, ``{"_object_": its class, ...}``: a Hydra
    factory (``_partial_: true``) with its arguments, an enum or a path with its value. Nothing
    is ever built from a record (`run/build.load_model`: from the run's config instead)."""
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
        self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None
    ) -> None:
        secrets = secret_values()
        checkpoint = {  # hyper_parameters, hparams_type, datamodule_hyper_parameters...
            key: plain(value, secrets) if "hparams" in key or "hyper_param" in key else value
            for key, value in checkpoint.items()
        }
        if not isinstance(get_filesystem(path), LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options for local files.")
        atomic_torch_save(checkpoint, path)
