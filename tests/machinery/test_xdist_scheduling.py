"""The test processes' schedule (tests/scheduling.py): the long files split, longest first."""

from __future__ import annotations

from pathlib import Path

from ..scheduling import (
    ONE_UNIT_PER_FUNCTION,
    ONE_UNIT_PER_TEST,
    START_FIRST,
    start_rank,
    unit_of,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_schedule_names_test_files_that_exist() -> None:
    """A renamed file would silently fall back to one process for a whole soak file."""
    for path in {*ONE_UNIT_PER_TEST, *ONE_UNIT_PER_FUNCTION, *START_FIRST}:
        assert (ROOT / path.split("::")[0]).is_file(), path


def test_a_file_is_one_unit_unless_it_is_split() -> None:
    assert unit_of("tests/project/test_digits.py::test_a[1]") == "tests/project/test_digits.py"
    zoo = "tests/machinery/test_zoo_exhaustive.py::test_kill_9_and_resume_in_two_processes"
    assert unit_of(f"{zoo}[gan]") == unit_of(f"{zoo}[padded]") == zoo
    kill = "tests/machinery/test_startup_kill.py::test_killing_the_launcher_at_ten_moments"
    assert unit_of(kill) == kill


def test_the_longest_units_start_first_in_the_listed_order() -> None:
    zoo = "tests/machinery/test_zoo_exhaustive.py"
    two_processes = unit_of(f"{zoo}::test_kill_9_and_resume_in_two_processes[gan]")
    units = [unit_of(f"{zoo}::test_dp_trains"), "tests/machinery/test_ddp.py", two_processes]
    ranked = sorted(units, key=start_rank)
    assert ranked == [two_processes, f"{zoo}::test_dp_trains", "tests/machinery/test_ddp.py"]
