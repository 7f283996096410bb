"""Errors a user can fix, shown as one paragraph instead of a traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input (config, paths, checkpoints): the message says what was wrong and what to do.

    ``every_rank``: raised alike by every process of a multi-process run (a check of
    synchronised metrics, a config every process builds), so only rank 0 shows it.
    ``exit_code``: 2 for bad input; a run stopped by its surroundings (a full disk) says so in
    one paragraph too, with its own status.
    """

    exit_code = 2

    def __init__(
        self, message: str, *, every_rank: bool = False, exit_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.every_rank = every_rank
        if exit_code is not None:
            self.exit_code = exit_code


def report_user_errors(func: F) -> F:
    """Turn a :class:`UserError` into a clear message on stderr and exit status 2 (or its own).

    ``HYDRA_FULL_ERROR=1`` keeps the traceback, as it does for Hydra's own errors.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as error:
            user_error = user_error_behind(error)
            if user_error is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"\nError: {user_error}\n", file=sys.stderr)
            sys.exit(user_error.exit_code)

    return wrapper  # type: ignore[return-value]


def user_error_behind(error: BaseException) -> UserError | None:
    """``error`` if it is a `UserError`, or the one it was raised from: Hydra's
    ``instantiate`` wraps what a constructor raises in an ``InstantiationException``.

    Lightning's ``MisconfigurationException`` ("you configured something Lightning cannot
    run", e.g. a monitored metric the module never logs) counts as one too.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, UserError):
            return current
        if _is_lightning_misconfiguration(current):
            return UserError(_with_hint(str(current)))
        seen.add(id(current))
        current = current.__cause__
    return None


def _is_lightning_misconfiguration(error: BaseException) -> bool:
    # By name: this module must not import Lightning (the entry points use it before torch).
    return type(error).__name__ == "MisconfigurationException" and type(
        error
    ).__module__.startswith(("lightning", "pytorch_lightning"))


def _with_hint(message: str) -> str:
    if "could not find the monitored key" in message:
        message += (
            " The best checkpoint follows `monitor` (configs/train.yaml): set it to a metric "
            "your module logs, e.g. `monitor=val_loss monitor_mode=min`."
        )
    return message


def require_extra(modules: tuple[str, ...], extra: str, what: str) -> None:
    """A :class:`UserError` naming the extra to install when one of ``modules`` (optional
    dependencies, e.g. LitServe for serve.py) is not installed, instead of an ImportError."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"{what} needs {', '.join(missing)}, which this environment does not have: install "
            f'the project\'s `{extra}` extra (`pip install -e ".[{extra}]"`, also in `dev`).'
        )
