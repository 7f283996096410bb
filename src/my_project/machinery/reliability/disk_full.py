"""A disk that fills up during a run: one paragraph naming the checkpoint kept (saves are
atomic) and the command that resumes from it, instead of a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

from ..errors import UserError, causes
from .resume import newest_checkpoint

_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def disk_full_error(error: BaseException, run_dir: str | None) -> UserError | None:
    """A UserError (exit status 1) for a full disk or quota anywhere in ``error``'s chain."""
    full = next((e for e in causes(error) if isinstance(e, OSError) and e.errno in _FULL), None)
    if full is None:
        return None
    what = f" writing {full.filename}" if full.filename else ""
    message = f"The disk is full ({full.strerror or 'No space left on device'}{what})."
    if (checkpoint := newest_checkpoint(Path(run_dir)) if run_dir else None) is None:
        return UserError(f"{message} Free some space and run it again.", exit_code=1)
    return UserError(
        f"{message} The run stopped; its newest complete checkpoint is {checkpoint}. Free some "
        f"space, then resume with `python train.py resume={run_dir}`.",
        exit_code=1,
    )
