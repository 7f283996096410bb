"""Checkpoint files that are either the old complete file or the new complete file, never half.

Lightning's ``TorchCheckpointIO`` "atomic" save writes through an fsspec transaction whose
temporary file lives in the system temp directory: when that is another filesystem (a tmpfs
``/tmp``, a node-local disk) the final move is a copy, which ``kill -9`` can cut short, and
nothing is fsynced. Here the temporary file sits next to the target, is fsynced, then
``os.replace``d over it (atomic on POSIX and Windows), and the directory is fsynced. The
temporary file's name ends in ``.part``, not ``.ckpt``: one a ``kill -9`` or a full disk leaves
behind is never taken for a checkpoint (``*.ckpt``, ``last*.ckpt``); the next save removes it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.plugins.io import TorchCheckpointIO

from .secrets import MASK, secret_values

_PARTIAL_PREFIX = ".partial-"
_PARTIAL_SUFFIX = ".part"


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def remove_stale_partials(folder: Path) -> None:
    """Delete temporary files left by a process that was killed while writing."""
    for path in folder.glob(f"{_PARTIAL_PREFIX}*"):
        pid = path.name[len(_PARTIAL_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{path.name}{_PARTIAL_SUFFIX}"
    try:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
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


def _mask_strings(data: Any, values: set[str]) -> Any:
    if isinstance(data, dict):
        return {key: _mask_strings(value, values) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_mask_strings(item, values) for item in data)
    if isinstance(data, str) and any(value in data for value in values):
        return MASK
    return data


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer with a crash-safe local save and secrets masked.

    Secret values (see ``reliability/secrets.py``) are masked in the hyperparameters a
    checkpoint carries. Remote paths (``s3://``...) keep Lightning's own implementation.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None
    ) -> None:
        values = secret_values()
        if values:
            checkpoint = {
                key: _mask_strings(value, values) if "hyper_parameters" in key else value
                for key, value in checkpoint.items()
            }
        if not isinstance(get_filesystem(path), LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options for local files.")
        atomic_torch_save(checkpoint, path)
