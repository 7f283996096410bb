"""Errors a user can fix, shown as one paragraph instead of a traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input (config, paths, checkpoints): the message says what was wrong and what to do."""

    exit_code = 2


def report_user_errors(func: F) -> F:
    """Turn a :class:`UserError` into a clear message on stderr and exit status 2 (or its own).

    ``HYDRA_FULL_ERROR=1`` keeps the traceback, as it does for Hydra's own errors.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as error:
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"\nError: {error}\n", file=sys.stderr)
            sys.exit(error.exit_code)

    return wrapper  # type: ignore[return-value]
