"""Jobs of the SLURM tests: the sbatch script of docs/machinery.md as written (and variants of
it), submitted from a folder of their own where `train.py` is, and what they leave."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .helpers import (
    DOCS_STYLE,
    ROOT,
    assert_same_after_resume,
    clean_env,
    csv_rows,
    read_metrics,
)
from .slurm_cluster import Cluster

DOCS = ROOT / "docs" / "machinery.md"
# Small and exact: the docs-style module, 512 samples, 256 a task, batches of 32: 8 steps an
# epoch; a stop agreed after every step.
ARGS = [*DOCS_STYLE, "trainer=ddp_cpu", "trainer.max_epochs=3", "logger=csv"]
ARGS += ["trainer.deterministic=true", "seed=7", "callbacks.stop_together.check_every_n_steps=1"]
STEPS_PER_EPOCH = 8
JOB_TIMEOUT = 300


def docs_script() -> str:
    """The sbatch script of docs/machinery.md's "On a SLURM cluster", as written."""
    section = DOCS.read_text().split("## On a SLURM cluster", 1)[1]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return next(block for block in blocks if block.startswith("#!/bin/bash"))


def edited(script: str, old: str, new: str) -> str:
    assert old in script, old
    return script.replace(old, new)


def without_kill_on_bad_exit(script: str) -> str:
    """The script as a user may write it: nothing ends the other tasks when one fails."""
    return edited(script, "srun --kill-on-bad-exit=1 ", "srun ")


def rank_zero_late(script: str, seconds: int = 4) -> str:
    """The script with rank 0 started ``seconds`` after the others: they have composed their
    configs (and, before, written their Hydra records into the run directory) when rank 0
    looks at it."""
    late = f'bash -c \'[ "$SLURM_PROCID" = 0 ] && sleep {seconds}; exec "$@"\' late python'
    return edited(script, "srun --kill-on-bad-exit=1 python", f"srun --kill-on-bad-exit=1 {late}")


def pause_at(step: int, marker: Path) -> list[str]:
    """Rank 0 waits after training step ``step`` until a signal comes (once: a restart goes on)."""
    return [
        "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
        f"+callbacks.pause.step={step}",
        f"+callbacks.pause.marker={marker}",
    ]


def refuse_on(rank: int, when: str, marker: Path) -> list[str]:
    """Rank ``rank`` refuses (exit status 2), writing the time to ``marker``; the run is long."""
    return [
        "+callbacks.refuse._target_=tests.machinery.rank_faults.RefuseOnRank",
        f"+callbacks.refuse.rank={rank}",
        f"+callbacks.refuse.when={when}",
        f"+callbacks.refuse.marker={marker}",
        "trainer.max_epochs=50",
    ]


def slurm_time(value: str) -> float:
    """A time `scontrol` prints (this machine's local time, to the second)."""
    return time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S"))


@dataclass
class Job:
    cluster: Cluster
    job_id: str
    folder: Path

    @property
    def run_dir(self) -> Path:
        return self.folder / "logs" / "train" / "runs" / f"slurm-{self.job_id}"

    @property
    def output(self) -> str:
        path = self.folder / f"slurm-{self.job_id}.out"
        return path.read_text() if path.is_file() else ""

    def finished(self, timeout: float = JOB_TIMEOUT) -> dict[str, str]:
        return self.cluster.wait(self.job_id, timeout)

    def completed(self) -> dict[str, str]:
        state = self.finished()
        assert state["JobState"] == "COMPLETED", self.output[-4000:]
        assert "Traceback" not in self.output, self.output[-4000:]
        return state

    def wait_for(self, path: Path, timeout: float = JOB_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            state = self.cluster.job(self.job_id)["JobState"]
            assert state in ("PENDING", "RUNNING"), f"{state} before {path}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {path} after {timeout} s:\n{self.output}"
            time.sleep(0.2)


class Submitter:
    """sbatch from a folder of its own holding `train.py`, the tests' environment exported
    (sbatch's default): this Python first on PATH, the repository on PYTHONPATH."""

    def __init__(self, cluster: Cluster, base: Path) -> None:
        self.cluster, self.base = cluster, base
        self.env = clean_env(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env.get('PATH', '')}"

    def folder(self, name: str) -> Path:
        folder = self.base / name
        folder.mkdir()
        (folder / "train.py").symlink_to(ROOT / "train.py")
        return folder

    def submit(self, name: str, script: str, *args: str, options: tuple[str, ...] = ()) -> Job:
        folder = self.folder(name)
        (folder / "train.sbatch").write_text(script)
        job_id = self.cluster.submit(
            folder / "train.sbatch", *args, cwd=folder, env=self.env, options=options
        )
        return Job(self.cluster, job_id, folder)

    def start_sweep(self, name: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
        """`python train.py -m hydra/launcher=slurm ...` started (it waits for its jobs), with
        what this one node has (a CPU, 1 GB)."""
        folder = self.folder(name)
        launcher = ["hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1"]
        launcher.append("hydra.launcher.mem_gb=1")
        sweep = subprocess.Popen(
            [sys.executable, "train.py", "-m", *launcher, *args],
            cwd=folder,
            env=self.cluster.env(self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        return sweep, folder


def assert_same_run(job: Job, reference: Job, steps: int = 3 * STEPS_PER_EPOCH) -> None:
    """Test metrics bit-equal to the job left alone; the other metrics, the weights and the CSV
    history too (but the epoch means a mid-epoch resume splits: `assert_same_after_resume`)."""
    assert_same_run_dirs(job.run_dir, reference.run_dir, steps)


def assert_same_run_dirs(run_dir: Path, reference: Path, steps: int) -> None:
    got, want = read_metrics(run_dir), read_metrics(reference)
    for key in ("test_acc", "test_loss"):
        assert got[key] == want[key], key
    assert_same_after_resume(got, want)
    assert_same_after_resume(csv_rows(run_dir), csv_rows(reference))
    ours, theirs = (
        torch.load(d / "checkpoints" / "last.ckpt", weights_only=True) for d in (run_dir, reference)
    )
    assert ours["global_step"] == theirs["global_step"] == steps
    for key, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), key
