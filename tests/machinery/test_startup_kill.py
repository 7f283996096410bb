"""`kill -9` of the process that launches a 2-process DDP run, at any moment of its start-up,
leaves no process of the run alive 10 s later.

Lightning's launcher starts rank 1 as a child process; killed outright, the launcher cannot
tell it anything. Without `distributed.die_with_launcher` the child, not yet met with rank 0,
retried its connection for torch's 30 minutes ("TCP client failed to connect ...
timeout=1800000ms"). The run is started in a session of its own, so every process it starts
shares its process group, wherever they are reparented when the launcher dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .helpers import DOCS_STYLE, ROOT, clean_env, pinned

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads processes from /proc"
)

# Long enough that it is always still running when killed.
RUN = [*DOCS_STYLE, "trainer.devices=2", "trainer.max_epochs=200", "logger=csv"]
GONE_WITHIN_S = 10.0
REGISTERED = "All distributed processes registered"


@dataclass
class Trial:
    after_child_s: float | None  # when the launcher was killed, after rank 1 was started
    formed: bool  # whether the processes had met (the process group existed) by then
    gone_after_s: float | None  # seconds until no process of the run was left; None: never
    returncode: int | None = None  # the launcher's
    output: str = ""


def alive_in_group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are not zombies."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) "
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            found.append(int(entry))
    return found


def kill_launcher_during_start_up(
    tmp_path: Path,
    after_child_s: float | None,
    before_child_s: float = 0.0,
    signum: int = signal.SIGKILL,
) -> Trial:
    """Start the run; send its launcher ``signum`` (kill -9) ``after_child_s`` seconds after it
    started rank 1 (None: ``before_child_s`` seconds after it started, before rank 1 exists)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "out.txt"
    command = [sys.executable, str(ROOT / "train.py"), *pinned(RUN)]
    command.append(f"hydra.run.dir={tmp_path / 'run'}")
    with open(log, "w") as out:
        launcher = subprocess.Popen(
            command,
            cwd=ROOT,
            env=clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pgid = launcher.pid
    try:
        started = time.monotonic()
        child_at = None
        while launcher.poll() is None and time.monotonic() - started < 300:
            now = time.monotonic()
            if child_at is None and len(alive_in_group(pgid)) > 1:
                child_at = now
            if after_child_s is None and now - started >= before_child_s:
                break
            if (
                child_at is not None
                and after_child_s is not None
                and now - child_at >= after_child_s
            ):
                break
            time.sleep(0.02)
        assert launcher.poll() is None, log.read_text()[-3000:]
        formed = REGISTERED in log.read_text()
        os.kill(launcher.pid, signum)
        launcher.wait(timeout=GONE_WITHIN_S + 30)
        killed = time.monotonic()
        while alive_in_group(pgid) and time.monotonic() - killed < GONE_WITHIN_S + 5:
            time.sleep(0.05)
        gone = None if alive_in_group(pgid) else time.monotonic() - killed
        return Trial(after_child_s, formed, gone, launcher.returncode, log.read_text())
    finally:
        for pid in alive_in_group(pgid):  # what a failing trial leaves: not for the next test
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize(  # more moments: the soak tier's ten below (3.5 s and 5 s among them)
    "after_child_s",
    [0.3, pytest.param(4.0, marks=pytest.mark.exhaustive)],
    ids=["child starting", "meeting"],
)
def test_killing_the_launcher_during_start_up_leaves_no_process(
    tmp_path: Path, after_child_s: float
) -> None:
    trial = kill_launcher_during_start_up(tmp_path, after_child_s)
    assert trial.gone_after_s is not None and trial.gone_after_s < GONE_WITHIN_S, trial


@pytest.mark.slow
def test_a_sigterm_during_ddp_start_up_ends_the_run_in_one_line_and_leaves_no_run_directory(
    tmp_path: Path,
) -> None:
    """`kill <launcher>` while rank 1 starts: nothing was trained, so nothing is kept (what the
    run wrote by then, `.hydra/`, `train.log`, goes too), every process ends, exit status 143."""
    trial = kill_launcher_during_start_up(tmp_path, 0.3, signum=signal.SIGTERM)
    assert trial.returncode == 128 + signal.SIGTERM, trial.output[-3000:]
    assert trial.gone_after_s is not None and trial.gone_after_s < GONE_WITHIN_S, trial
    stopped = [line for line in trial.output.splitlines() if line.startswith("Stopped by")]
    assert len(stopped) == 1 and "SIGTERM" in stopped[0], trial.output[-3000:]
    assert "Traceback" not in trial.output, trial.output[-3000:]
    assert not (tmp_path / "run").exists(), sorted((tmp_path / "run").rglob("*"))


# Ten moments of a start-up: before rank 1 exists, then from its first instant to after the
# processes met (about 4-8 s after it started on 2 busy cores).
MOMENTS: list[tuple[float | None, float]] = [
    (None, 1.0),
    (None, 3.0),
    (0.0, 0.0),
    (0.1, 0.0),
    (0.5, 0.0),
    (1.0, 0.0),
    (2.0, 0.0),
    (3.5, 0.0),
    (5.0, 0.0),
    (8.0, 0.0),
]


@pytest.mark.soak
def test_killing_the_launcher_at_ten_moments_of_start_up_leaves_no_process(
    tmp_path: Path,
) -> None:
    trials = [
        kill_launcher_during_start_up(tmp_path / str(i), after, before)
        for i, (after, before) in enumerate(MOMENTS)
    ]
    print("\n".join(map(str, trials)))
    assert all(t.gone_after_s is not None and t.gone_after_s < GONE_WITHIN_S for t in trials), (
        trials
    )
