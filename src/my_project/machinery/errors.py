"""Errors a user can fix, shown as one paragraph instead of a traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input: the message says what was wrong and what to do. ``every_rank``: raised alike
    by every process, so only rank 0 shows it; ``exit_code``: 2, or a NaN loss's 3."""

    exit_code = 2

    def __init__(
        self, message: str, *, every_rank: bool = False, exit_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.every_rank = every_rank
        self.exit_code = exit_code or self.exit_code


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it was raised from or while handling, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def user_error_in(error: BaseException) -> UserError | None:
    """``error`` if it is a UserError, or the one behind it (Hydra and OmegaConf wrap them)."""
    return next((e for e in causes(error) if isinstance(e, UserError)), None)


def report(error: UserError) -> None:
    print(f"\nError: {error}\n", file=sys.stderr, flush=True)


def report_user_errors(func: F) -> F:
    """A :class:`UserError` out of ``func`` as its paragraph and exit status (not with
    ``HYDRA_FULL_ERROR=1``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as error:
            user_error = user_error_in(error)
            if user_error is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            report(user_error)
            sys.exit(user_error.exit_code)

    return wrapper  # type: ignore[return-value]


def require_extra(modules: tuple[str, ...], extra: str, what: str) -> None:
    """A :class:`UserError` naming the extra to install when one of ``modules`` is missing."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"{what} needs {', '.join(missing)}, which this environment does not have: install "
            f'the project\'s `{extra}` extra (`pip install -e ".[{extra}]"`, also in `dev`).'
        )


def more(items: list[Any], shown: int) -> str:
    """`` (and N more)`` after the first ``shown`` of ``items`` (an ellipsis before a full stop
    read as "....")."""
    return f" (and {len(items) - shown} more)" if len(items) > shown else ""
