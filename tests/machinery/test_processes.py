"""The warm start of entry points (processes.py) is `python <script>` minus the imports: the
same run, the same error, the same exit, the same view of its environment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from . import processes
from .helpers import DOCS_STYLE, ROOT, clean_env, pinned, read_metrics

PROBE = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
                  "team": "lit_team" in str(sys.path), "main": __name__,
                  "var": os.environ.get("PROBE_VAR"), "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
if sys.argv[1:] == ["fail"]:
    raise ValueError("the probe fails")
sys.exit(int(sys.argv[1]) if sys.argv[1:] else 0)
"""


def plain_run(args: list[str], cwd: Path, env: dict[str, str], timeout: float):
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def both(args: list[str], cwd: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """The command started warm, then as a plain `python` process."""
    return [start(args, cwd, env, timeout=300) for start in (processes.run, plain_run)]


@pytest.mark.parametrize("argv", [[], ["3"], ["fail"]])
def test_a_script_sees_and_ends_as_under_plain_python(argv: list[str], tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = clean_env(PROBE_VAR="set", PYTHONPATH=str(tmp_path / "lit_team"))
    warm, fresh = both([sys.executable, str(script), *argv], cwd=tmp_path, env=env)
    expected = {(): 0, ("3",): 3, ("fail",): 1}[tuple(argv)]
    assert warm.returncode == fresh.returncode == expected
    assert json.loads(warm.stdout) == json.loads(fresh.stdout)
    assert json.loads(warm.stdout)["main"] == "__main__"
    assert warm.stderr.splitlines()[0] == fresh.stderr.splitlines()[0] == "to stderr"
    if argv == ["fail"]:
        assert warm.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1]
        assert "ValueError: the probe fails" in warm.stderr


def test_a_signal_ends_a_warm_process_as_it_ends_a_plain_one(tmp_path: Path) -> None:
    script = tmp_path / "wait.py"
    marker = tmp_path / "started"
    script.write_text(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n"
    )
    started = processes.start([sys.executable, str(script)], cwd=tmp_path, env=clean_env())
    while not marker.exists():
        assert started.poll() is None
    started.send_signal(signal.SIGTERM)
    assert started.wait(timeout=30) == -signal.SIGTERM


@pytest.mark.exhaustive  # the fast tests above show the same process; this, the same training
def test_a_warm_training_is_bit_identical_to_a_plain_one_and_a_bad_input_reads_the_same(
    tmp_path: Path,
) -> None:
    args = [sys.executable, str(ROOT / "train.py")]
    run = ["trainer.max_epochs=1", "logger=csv", "seed=3", "trainer.deterministic=true"]
    runs = [tmp_path / "warm", tmp_path / "fresh"]
    for run_dir, start in zip(runs, (processes.run, plain_run), strict=True):
        command = [*args, *pinned([*DOCS_STYLE, *run, f"hydra.run.dir={run_dir}"])]
        result = start(command, cwd=ROOT, env=clean_env(), timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
    assert read_metrics(runs[0]) == read_metrics(runs[1])
    weights = [
        torch.load(r / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"] for r in runs
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])

    bad = [*args, *pinned([*DOCS_STYLE, "data.batch_size=0", f"hydra.run.dir={tmp_path / 'bad'}"])]
    warm, fresh = both(bad, ROOT, clean_env())
    assert warm.returncode == fresh.returncode == 2
    assert warm.stderr.strip().split("\n\n")[-1] == fresh.stderr.strip().split("\n\n")[-1]
