"""Every use of Hydra's private names (``hydra._internal``) in the machinery, in one place.

- :func:`errors_reported_by`: Hydra reports what fails before a job (a key that does not exist,
  broken YAML, a place it cannot write) with its private ``hydra._internal.utils.run_and_report``,
  which prints and exits 1; it has no public hook, so that function is wrapped for the duration.
- :func:`args_parser`: Hydra's own command-line parser (``get_args_parser``), which knows its
  flags (``--config-dir``...), for a DDP child that re-runs the command.

Checked against hydra-core 1.3.x (`CHECKED`); on another version the wrapper is not applied
(Hydra then reports its errors its own way, exit status 1), and
tests/machinery/test_lightning_compat.py fails until it is checked.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import hydra
from packaging.version import Version

CHECKED = (Version("1.3.0"), Version("1.3.99"))


def checked() -> bool:
    """Whether this Hydra is one the wrapper was checked against."""
    low, high = CHECKED
    return low <= Version(hydra.__version__) <= high


@contextlib.contextmanager
def errors_reported_by(
    wrap: Callable[[Callable[[], Any]], Callable[[], Any]],
) -> Iterator[bool]:
    """Inside, Hydra runs each of its steps as ``run_and_report(wrap(step))``; yields whether the
    wrapper is applied (not on a Hydra it was not checked against)."""
    import hydra._internal.utils as hydra_utils

    original = getattr(hydra_utils, "run_and_report", None)
    if original is None or not checked():
        yield False
        return

    def run_and_report(func: Callable[[], Any]) -> Any:
        return original(wrap(func))

    hydra_utils.run_and_report = run_and_report
    try:
        yield True
    finally:
        hydra_utils.run_and_report = original


def args_parser() -> argparse.ArgumentParser:
    """Hydra's command-line parser (its flags, then the overrides)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()
