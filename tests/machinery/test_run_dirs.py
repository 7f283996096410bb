"""Run directories never collide; `ckpt_path=last` and `resume=` find the right run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from my_project.machinery.data.resumable import EpochShuffleSampler, ResumableDataLoader
from my_project.machinery.errors import UserError
from my_project.machinery.reliability.resume import (
    expand_resume_argument,
    resolve_checkpoint_path,
)
from my_project.machinery.reliability.run_dir import unique_dir

from . import processes
from .helpers import DOCS_STYLE, ON_CPU, ROOT, clean_env, read_metrics


def test_unique_dir_adds_a_suffix_when_the_name_is_taken(tmp_path: Path) -> None:
    prefix = str(tmp_path / "runs" / "2030-01-01_00-00-00")
    os.makedirs(prefix)
    assert unique_dir(prefix) == prefix + "_1"
    assert unique_dir(prefix) == prefix + "_1"  # the same answer within one process


def test_processes_asking_for_the_same_name_at_once_get_different_dirs(tmp_path: Path) -> None:
    prefix = str(tmp_path / "2030-01-01_00-00-00")
    code = "import sys; from my_project.machinery.reliability.run_dir import unique_dir; print(unique_dir(sys.argv[1]))"
    processes = [
        subprocess.Popen([sys.executable, "-c", code, prefix], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    made = [p.communicate(timeout=60)[0].strip() for p in processes]
    assert len(set(made)) == 6 and all(Path(p).is_dir() for p in made)


@pytest.mark.slow
def test_two_runs_started_at_once_write_to_different_directories(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        *ON_CPU,
        *DOCS_STYLE,
        "debug=fdr",
        f"paths.log_dir={tmp_path}",
    ]
    runs = [processes.start(command, cwd=ROOT, env=clean_env()) for _ in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-3000:]
    dirs = sorted((tmp_path / "train" / "runs").iterdir())
    assert len(dirs) == 2
    for run_dir in dirs:
        assert "test_acc" in read_metrics(run_dir)
        assert (run_dir / "config.yaml").read_text().count(str(run_dir)) >= 1


def make_run(path: Path, overrides: list[str]) -> Path:
    (path / ".hydra").mkdir(parents=True)
    (path / "checkpoints").mkdir()
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (path / "checkpoints" / "last.ckpt").write_bytes(b"x")
    return path


def test_resume_argument_reruns_the_saved_command_with_new_overrides(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", ["model.hidden=8", "trainer.max_epochs=3", "ckpt_path=x.ckpt"])
    argv = expand_resume_argument([f"resume={run}", "trainer.max_epochs=5"])
    assert argv[:2] == ["model.hidden=8", "trainer.max_epochs=5"]
    assert f"hydra.run.dir={run}" in argv and "ckpt_path=last" in argv
    assert "ckpt_path=x.ckpt" not in argv and "trainer.max_epochs=3" not in argv
    assert any(a.startswith("hydra.output_subdir=.hydra/resume_") for a in argv)
    assert expand_resume_argument(["model.lr=1"]) == ["model.lr=1"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such run directory"),
        ("no_overrides", "overrides.yaml is missing"),
        ("no_checkpoint", "has no checkpoints/last.ckpt"),
        ("masked_secret", "set +extra.api_token to a secret"),
    ],
)
def test_resume_of_an_unusable_directory_says_why(tmp_path: Path, setup: str, message: str) -> None:
    run = tmp_path / "run"
    if setup != "missing":
        make_run(run, ["+extra.api_token=***"] if setup == "masked_secret" else [])
    if setup == "no_overrides":
        (run / ".hydra" / "overrides.yaml").unlink()
    if setup == "no_checkpoint":
        (run / "checkpoints" / "last.ckpt").unlink()
    with pytest.raises(UserError, match=message):
        expand_resume_argument([f"resume={run}"])


def test_ckpt_path_last_prefers_this_run_then_the_newest_other_run(tmp_path: Path) -> None:
    older, newer, current = (make_run(tmp_path / n, []) for n in ("a", "b", "c"))
    os.utime(older / "checkpoints" / "last.ckpt", (1, 1))
    assert resolve_checkpoint_path("last", current) == str(current / "checkpoints" / "last.ckpt")
    (current / "checkpoints" / "last.ckpt").unlink()
    assert resolve_checkpoint_path("last", current) == str(newer / "checkpoints" / "last.ckpt")
    assert resolve_checkpoint_path("some/path.ckpt", current) == "some/path.ckpt"
    with pytest.raises(UserError, match=r"ckpt_path=last: there is no checkpoints/last\.ckpt"):
        resolve_checkpoint_path("last", tmp_path / "empty" / "run")


def order(loader: ResumableDataLoader, epoch: int) -> list[int]:
    loader.sampler.set_epoch(epoch)
    return [int(i) for batch in loader for i in batch[0]]


def test_train_loader_order_is_a_function_of_seed_and_epoch_and_resumes_mid_epoch() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(50))

    def loader(seed: int) -> ResumableDataLoader:
        return ResumableDataLoader(data, batch_size=8, sampler=EpochShuffleSampler(data, seed))

    first = loader(1)
    epoch0, epoch1 = order(first, 0), order(first, 1)
    assert sorted(epoch0) == list(range(50)) and epoch0 != epoch1
    assert order(loader(1), 1) == epoch1 and order(loader(2), 1) != epoch1

    # Three batches of epoch 1 taken, then the process dies: a new loader continues there.
    first.sampler.set_epoch(1)
    iterator = iter(first)
    taken = [int(i) for _ in range(3) for i in next(iterator)[0]]
    state = first.state_dict()
    assert state == {"epoch": 1, "batches": 3, "seed": 1}
    resumed = loader(999)  # the seed comes from the checkpoint
    resumed.load_state_dict(state)
    assert taken + order(resumed, 1) == epoch1
    # A checkpoint from the end of epoch 1 starts epoch 2 from its first batch.
    resumed.load_state_dict({"epoch": 1, "batches": 7, "seed": 1})
    assert order(resumed, 2) == order(loader(1), 2)
