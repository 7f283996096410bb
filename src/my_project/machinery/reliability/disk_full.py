"""A write the disk refuses (full, over quota, read-only, not permitted) during a run: one
paragraph naming what could not be written, the checkpoint kept (saves are atomic) and the
command that resumes from it, instead of a traceback. Exit status 2, as for bad input: the
machine's state, not the run, has to change."""

from __future__ import annotations

import errno
from pathlib import Path

from ..errors import UserError, causes
from .resume import newest_checkpoint

_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM)


def disk_full_error(error: BaseException, run_dir: str | None) -> UserError | None:
    """A UserError for a full disk or quota, or a write refused (a read-only filesystem, a
    folder without write permission), anywhere in ``error``'s chain; else None."""
    refused = next(
        (e for e in causes(error) if isinstance(e, OSError) and e.errno in _FULL + _REFUSED),
        None,
    )
    if refused is None:
        return None
    what = f" writing {refused.filename}" if refused.filename else ""
    reason = refused.strerror or os_reason(refused.errno)
    if refused.errno in _FULL:
        message, fix = f"The disk is full ({reason}{what}).", "Free some space"
    else:
        message = f"A file of the run cannot be written ({reason}{what})."
        fix = "Make the run's folder writable (or choose another: `paths.log_dir=...`)"
    if (checkpoint := newest_checkpoint(Path(run_dir)) if run_dir else None) is None:
        return UserError(f"{message} {fix}, and run it again.")
    return UserError(
        f"{message} The run stopped; its newest complete checkpoint is {checkpoint}. {fix}, "
        f"then resume with `python train.py resume={run_dir}`."
    )


def os_reason(number: int | None) -> str:
    import os

    return os.strerror(number) if number is not None else "the operating system refused it"
