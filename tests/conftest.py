"""Settings for every test process, before torch is imported.

One thread per torch process: `make test` runs one test process per core, each starting runs
of its own, and the tests' models are tiny, so more threads only contend for the cores (a
2-process DDP run sets one thread per process by itself). A run's results do not depend on it:
every comparison of two runs is between runs with the same setting.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """`--dist loadfile` with the soak tier's long files split, longest first (scheduling.py)."""
    if config.getoption("dist") != "loadfile":
        return None
    from .scheduling import LongestFirstFileScheduling

    return LongestFirstFileScheduling(config, log)
