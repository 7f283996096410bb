"""Which test process runs which tests (`make test` runs pytest-xdist with `--dist loadfile`).

xdist's loadfile keeps a file's tests on one process, so a module fixture (a trained run) is
made once, and starts the files with the most tests first. Neither suits the soak tier, whose
single tests run for minutes: a file of them on one process, started last, sets the tier's wall
time. xdist offers no setting for either choice, only its scheduler hook, hence this subclass:
the files below are split, and the longest units start first.
"""

from __future__ import annotations

from collections import OrderedDict

from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

# Files of tests that share no costly fixture: one unit per test.
ONE_UNIT_PER_TEST = {
    "tests/machinery/test_startup_kill.py",  # kills at moments of start-up, up to a minute each
    # template-only:start
    "tests/template/test_generated_projects.py",  # each generated project's own suite: ~2 min
    # template-only:end
}
# Files whose parametrizations share a module fixture: one unit per test function.
ONE_UNIT_PER_FUNCTION = {"tests/machinery/test_zoo_exhaustive.py"}
# What starts first, in this order (a node id prefix each); the rest by their number of tests.
START_FIRST = (
    "tests/machinery/test_zoo_exhaustive.py::test_kill_9_and_resume_in_two_processes",  # ~4 min
    "tests/machinery/test_ddp_lifecycle.py",  # signals at 20 points: ~3.5 min
    # template-only:start
    "tests/template/test_generated_projects.py::test_deleting_the_examples",
    "tests/template/test_moving_in.py",  # a generated project's lint and own suite: ~3 min
    "tests/template/test_generated_projects.py",
    # template-only:end
    "tests/machinery/test_zoo_exhaustive.py",
    "tests/machinery/test_startup_kill.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work (what one process runs together) a test belongs to."""
    path = nodeid.split("::", 1)[0]
    if path in ONE_UNIT_PER_TEST:
        return nodeid
    if path in ONE_UNIT_PER_FUNCTION:
        return nodeid.split("[", 1)[0]
    return path


def start_rank(unit: str) -> int:
    """A unit's place in START_FIRST; len(START_FIRST) for the rest."""
    return next((i for i, p in enumerate(START_FIRST) if unit.startswith(p)), len(START_FIRST))


class LongestFirstFileScheduling(LoadFileScheduling):
    """loadfile, with the files above split and the longest units first. (A worker holds its
    last test until another arrives, so xdist gives each worker two units at a time.)"""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._ordered:  # the queue is complete before the first unit is assigned
            # a stable sort: the rest keep xdist's order (most tests first)
            ordered = sorted(self.workqueue.items(), key=lambda unit: start_rank(unit[0]))
            self.workqueue = OrderedDict(ordered)
            self._ordered = True
        super()._assign_work_unit(node)
