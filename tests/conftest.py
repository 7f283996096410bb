"""Settings for every test process, before torch is imported.

One thread per torch process: `make test` runs one test process per core, each starting runs
of its own, and the tests' models are tiny, so more threads only contend for the cores (a
2-process DDP run sets one thread per process by itself). A run's results do not depend on it:
every comparison of two runs is between runs with the same setting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True, scope="session")
def _data_outside_the_project(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`paths.data_dir` in a folder of the session's, for every run of a test (in this process
    and those it starts): a data module that writes its files (the zoo's LHT module) never
    writes into the project's data/. A test that needs data of its own names its folder."""
    from .machinery.helpers import DATA_DIR_VAR

    os.environ.setdefault(DATA_DIR_VAR, str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def _lightnings_rank_stays_zero() -> Iterator[None]:
    """A test that leaves Lightning's process-wide rank at 1 (a strategy's set_world_ranks, in
    process) silences the rank-zero warnings and logs of every later test of its process, so
    they fail far from the cause: fail the test that leaves it instead."""
    yield
    rank_zero = sys.modules.get("lightning.fabric.utilities.rank_zero")
    if rank_zero is not None:
        rank = getattr(rank_zero.rank_zero_only, "rank", 0)
        assert rank == 0, f"the test left Lightning's rank_zero_only.rank at {rank}"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """`--dist loadfile` with the soak tier's long files split, longest first (scheduling.py)."""
    if config.getoption("dist") != "loadfile":
        return None
    from .scheduling import LongestFirstFileScheduling

    return LongestFirstFileScheduling(config, log)
