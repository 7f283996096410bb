"""Checkpoint files: never half-written, carrying their own digest, holding only plain data.

- Atomic: the temporary file sits next to the target, is fsynced, then ``os.replace``d over it,
  and the directory is fsynced (Lightning's own "atomic" save goes through the system temp
  directory, another filesystem where the final move is a copy ``kill -9`` can cut short). Its
  name ends in ``.part``, never taken for a checkpoint; the next save removes one a dead writer left.
- Digest: the sha256 of the file is written into the zip archive's comment (``torch.save``
  writes a zip; the comment is its last bytes, so it is renamed into place with the file;
  ``unzip -z last.ckpt`` shows it). :func:`check_intact` verifies it; a checkpoint from elsewhere
  has none, and its entries' CRCs are checked instead: ``torch.load`` checks neither.
- Plain: hyperparameters are saved as data ``torch.load(weights_only=True)`` reads (:func:`plain`),
  with secret values masked (``reliability/secrets.py``).
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
_PARTIAL_SUFFIX = ".part"
_DIGEST = b"sha256:"
_COMMENT = len(_DIGEST) + 64  # the zip comment this module writes: "sha256:<hex>"
_SILENT = " (a changed byte in its weights would change every result, without an error)"
_checked: dict[tuple[str, int, int, int], str | None] = {}  # (path, size, mtime, inode): problem


def _fsync_dir(folder: Path) -> None:
    if os.name == "posix":
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_partials(folder: Path) -> None:
    """Delete temporary files left by a process that was killed while writing."""
    for path in folder.glob(f"{_PARTIAL_PREFIX}*"):
        pid = path.name[len(_PARTIAL_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        pass
    return True


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, its digest added, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{path.name}{_PARTIAL_SUFFIX}"
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
    _fsync_dir(path.parent)
    remove_stale_partials(path.parent)
    return path


def _sha256(handle: Any, length: int) -> str:
    """The sha256 of the first ``length`` bytes of the open file ``handle``."""
    digest, _ = hashlib.sha256(), handle.seek(0)
    while length > 0 and (chunk := handle.read(min(length, 1 << 22))):
        digest.update(chunk)
        length -= len(chunk)
    return digest.hexdigest()


def damage(path: str | Path) -> str | None:
    """What is wrong with the checkpoint file ``path``: its digest does not match (one this
    module wrote), or an entry fails its CRC (one from elsewhere); None when it is intact.
    Each version of a file is read once per process."""
    stat = os.stat(path)
    key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _checked:
        _checked[key] = _damage(Path(path), stat.st_size)
    return _checked[key]


def _damage(path: Path, size: int) -> str | None:
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
    """A UserError when ``path`` is damaged (:func:`damage`), naming the newest checkpoint
    beside it that is intact."""
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


_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def plain(value: Any) -> Any:
    """``value`` as data ``torch.load(weights_only=True)`` reads, which unpickles no class it
    does not know: OmegaConf containers as lists and dicts; a Hydra factory (``_partial_:
    true``, a ``functools.partial``) as its config; a class as its name; any other object (an
    enum, a path) as ``{"_target_": its class, "_args_": [its value]}``, a record, not a value
    (`run/build.load_model` rebuilds such arguments from the run's config)."""
    from omegaconf import Container, OmegaConf

    if type(value) in _PLAIN or isinstance(value, torch.Tensor):
        return value
    if type(value).__module__ == "numpy":  # a numpy scalar or array
        return value.tolist()
    if isinstance(value, Container):
        return plain(OmegaConf.to_container(value, resolve=True))
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) and not isinstance(value, Enum):
        kind = list if isinstance(value, list) else tuple if isinstance(value, tuple) else set
        return kind(plain(item) for item in value)
    if isinstance(value, type):
        return _name(value)
    if isinstance(value, functools.partial):
        args = {"_args_": plain(list(value.args))} if value.args else {}
        return {"_target_": _name(value.func), "_partial_": True, **args, **plain(value.keywords)}
    if isinstance(value, (Enum, os.PathLike)):
        given = value.value if isinstance(value, Enum) else os.fspath(value)
        return {"_target_": _name(type(value)), "_args_": [plain(given)]}
    return {"_target_": _name(type(value))}


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _mask_strings(data: Any, values: set[str]) -> Any:
    if isinstance(data, dict):
        return {key: _mask_strings(value, values) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_mask_strings(item, values) for item in data)
    if isinstance(data, str) and any(value in data for value in values):
        return MASK
    return data


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer with a crash-safe, digested local save of plain
    hyperparameters, secrets masked; its loads are verified first. Remote paths
    (``s3://``...) keep Lightning's own implementation."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None
    ) -> None:
        values = secret_values()
        checkpoint = {
            key: _mask_strings(plain(value), values)
            if "hparams" in key or "hyper_param" in key
            else value
            for key, value in checkpoint.items()
        }
        if not isinstance(get_filesystem(path), LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options for local files.")
        atomic_torch_save(checkpoint, path)

    def load_checkpoint(self, path: _PATH, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if isinstance(get_filesystem(path), LocalFileSystem) and Path(path).is_file():
            check_intact(path)
        return super().load_checkpoint(path, *args, **kwargs)
