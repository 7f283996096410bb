"""Run directories never collide and hold one run each, locked for its life; `ckpt_path=last`
and `resume=` find the right run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from my_project.machinery.data.resumable import EpochShuffleSampler, ResumableDataLoader
from my_project.machinery.errors import UserError
from my_project.machinery.reliability.resume import (
    expand_resume_argument,
    resolve_checkpoint_path,
)
from my_project.machinery.reliability.run_dir import claim, release, unique_dir

from . import processes
from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    FAST,
    ON_CPU,
    ROOT,
    clean_env,
    one_paragraph_error,
    read_metrics,
    run_entry,
    run_main_in_process,
)


def test_unique_dir_adds_a_suffix_when_the_name_is_taken(tmp_path: Path) -> None:
    prefix = str(tmp_path / "runs" / "2030-01-01_00-00-00")
    os.makedirs(prefix)
    assert unique_dir(prefix) == prefix + "_1"
    assert unique_dir(prefix) == prefix + "_1"  # the same answer within one process


def test_processes_asking_for_the_same_name_at_once_get_different_dirs(tmp_path: Path) -> None:
    """Six at once, each holding its answer until all have one; and what none of them wrote
    into is gone when they exit (Hydra may resolve a run directory it then does not use)."""
    prefix = str(tmp_path / "logs" / "2030-01-01_00-00-00")
    module = "my_project.machinery.reliability.run_dir"
    code = (
        f"import sys; from {module} import unique_dir; print(unique_dir(sys.argv[1]), flush=True)"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code + "; sys.stdin.read()", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    made = [p.stdout.readline().strip() for p in processes if p.stdout is not None]
    assert len(set(made)) == 6 and all(Path(p).is_dir() for p in made)
    (Path(made[0]) / "train.log").write_text("a run\n")
    for process in processes:
        process.communicate(timeout=60)
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [Path(made[0]).name]


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


def test_a_second_resume_continues_the_command_of_the_latest_one(tmp_path: Path) -> None:
    """A resume that asked for more epochs is where a later plain `resume=` starts from."""
    run = make_run(tmp_path / "run", ["model.hidden=8", "trainer.max_epochs=3"])
    latest = run / ".hydra" / "resume_2026-01-02_03-04-05"
    latest.mkdir()
    saved = ["model.hidden=8", "trainer.max_epochs=5", "ckpt_path=last", f"resume={run}"]
    (latest / "overrides.yaml").write_text("".join(f"- {o}\n" for o in saved))
    argv = expand_resume_argument([f"resume={run}"])
    assert argv[:2] == ["model.hidden=8", "trainer.max_epochs=5"]
    assert [a for a in argv if a.startswith("resume=")] == [f"resume={run}"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such run directory"),
        ("no_overrides", "overrides.yaml is missing"),
        ("no_checkpoint", "has no checkpoint to continue from"),
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


def test_ckpt_path_last_prefers_this_run_then_the_newest_other_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older, newer, current = (make_run(tmp_path / n, []) for n in ("a", "b", "c"))
    os.utime(older / "checkpoints" / "last.ckpt", (1, 1))
    assert resolve_checkpoint_path("last", current) == str(current / "checkpoints" / "last.ckpt")
    assert "continuing from" not in capsys.readouterr().out
    (current / "checkpoints" / "last.ckpt").unlink()
    assert resolve_checkpoint_path("last", current) == str(newer / "checkpoints" / "last.ckpt")
    assert f"continuing from {newer / 'checkpoints' / 'last.ckpt'}" in capsys.readouterr().out
    assert resolve_checkpoint_path("some/path.ckpt", current) == "some/path.ckpt"
    with pytest.raises(UserError, match=r"ckpt_path=last: there is no checkpoints/last\.ckpt"):
        resolve_checkpoint_path("last", tmp_path / "empty" / "run")


def test_ckpt_path_last_takes_the_newest_run_of_the_same_model_or_says_none_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newest run beside may be of another model (the example's, beside a team's): `last`
    passes over it, rather than refuse its epochs first and its weights after."""
    ours, theirs, untold, current = (make_run(tmp_path / n, []) for n in ("a", "b", "c", "d"))
    (ours / "config.yaml").write_text("model:\n  _target_: team.Mine\n  lr: 0.1\n")
    (theirs / "config.yaml").write_text("model:\n  _target_: example.Classifier\n")
    os.utime(ours / "checkpoints" / "last.ckpt", (1, 1))
    os.utime(untold / "checkpoints" / "last.ckpt", (0, 0))  # oldest, its model unknown
    (current / "checkpoints" / "last.ckpt").unlink()
    assert resolve_checkpoint_path("last", current, "team.Mine") == str(
        ours / "checkpoints" / "last.ckpt"
    )
    assert "that trained team.Mine, passing over 1 newer of other models" in capsys.readouterr().out
    assert resolve_checkpoint_path("last", current, "example.Classifier") == str(
        theirs / "checkpoints" / "last.ckpt"
    )
    # a run whose config.yaml does not say what it trained is taken at its word
    assert resolve_checkpoint_path("last", current, "team.Other") == str(
        untold / "checkpoints" / "last.ckpt"
    )
    (untold / "checkpoints" / "last.ckpt").unlink()
    with pytest.raises(UserError) as refused:
        resolve_checkpoint_path("last", current, "team.Other")
    assert str(refused.value).startswith(
        f"ckpt_path=last: no run under {tmp_path} trained this run's model "
        f"(model._target_=team.Other); the newest last.ckpt there, "
        f"{theirs / 'checkpoints' / 'last.ckpt'}, is of example.Classifier."
    )


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
    assert state == {"epoch": 1, "batches": 3, "seed": 1, "batch_size": 8}
    resumed = loader(999)  # the seed comes from the checkpoint
    resumed.load_state_dict(state)
    assert taken + order(resumed, 1) == epoch1
    # A checkpoint from the end of epoch 1 starts epoch 2 from its first batch.
    resumed.load_state_dict({"epoch": 1, "batches": 7, "seed": 1})
    assert order(resumed, 2) == order(loader(1), 2)


def finished_run(path: Path) -> Path:
    """A run directory as a finished training leaves it (the files a new run would replace)."""
    make_run(path, ["seed=1"])
    (path / "metrics.json").write_text('{"test_acc": 0.9}\n')
    (path / "csv").mkdir()
    (path / "csv" / "metrics.csv").write_text("epoch,step,val_acc\n0,15,0.5\n")
    return path


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def test_a_new_run_into_a_directory_that_holds_a_run_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path / "run")
    before = snapshot(run)
    code, err = run_main_in_process(
        "train",
        [*DOCS_STYLE, "trainer.max_epochs=1", f"hydra.run.dir={run}"],
        tmp_path,
        monkeypatch,
    )
    message = one_paragraph_error(code, err)
    assert f"{run} holds a run already (.hydra, checkpoints, metrics.json)" in message
    assert f"`python train.py resume={run}`" in message and "choose another directory" in message
    args = [*DOCS_STYLE_EVAL, f"ckpt_path={run}/checkpoints/last.ckpt", f"hydra.run.dir={run}"]
    code, err = run_main_in_process("eval", args, tmp_path, monkeypatch)
    assert "holds a run already" in one_paragraph_error(code, err)
    assert snapshot(run) == before


HOLD = """
import sys, time
from pathlib import Path
from my_project.machinery.reliability.run_dir import claim
claim(Path(sys.argv[1]), (), "train")
print("held", flush=True)
time.sleep(120)
"""


def test_a_second_process_is_refused_while_another_holds_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`resume=` of a directory another process holds (before its first checkpoint too), or eval
    into it: refused at once; once that process is killed (kill -9), nothing stale is left."""
    run = finished_run(tmp_path / "run")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True, env=clean_env()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = snapshot(run)
        code, err = run_main_in_process("train", [f"resume={run}"], tmp_path, monkeypatch)
        message = one_paragraph_error(code, err)
        assert f"{run} is in use: another process holds its lock" in message
        args = [*DOCS_STYLE_EVAL, f"ckpt_path={run}/checkpoints/last.ckpt", f"hydra.run.dir={run}"]
        code, err = run_main_in_process("eval", args, tmp_path, monkeypatch)
        assert f"{run} is in use" in one_paragraph_error(code, err)
        assert snapshot(run) == before
        # a run still going that has saved no checkpoint yet: in use too, not "no checkpoint"
        (run / "checkpoints").rename(tmp_path / "saved")
        code, err = run_main_in_process("train", [f"resume={run}"], tmp_path, monkeypatch)
        assert f"resume={run}: {run} is in use: another" in one_paragraph_error(code, err)
        (tmp_path / "saved").rename(run / "checkpoints")
    finally:
        holder.kill()
        holder.wait()
    claim(run, (), "train")  # the OS released the dead holder's lock
    release()


def test_resume_continues_from_a_typed_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", ["model.hidden=8"])
    argv = expand_resume_argument([f"resume={run}", f"ckpt_path={run}/checkpoints/a.ckpt"])
    assert [a for a in argv if a.startswith("ckpt_path=")] == [
        f"ckpt_path={run}/checkpoints/a.ckpt"
    ]


def test_ckpt_path_last_of_a_run_without_last_ckpt_is_its_newest_checkpoint(
    tmp_path: Path,
) -> None:
    """A run the disk stopped before its first last.ckpt may hold a best one: `resume=`
    continues from it."""
    run = make_run(tmp_path / "run", ["seed=1"])
    (run / "checkpoints" / "last.ckpt").rename(run / "checkpoints" / "epoch_000.ckpt")
    assert resolve_checkpoint_path("last", run) == str(run / "checkpoints" / "epoch_000.ckpt")
    assert "ckpt_path=last" in expand_resume_argument([f"resume={run}"])


@pytest.mark.slow
def test_two_resumes_of_one_directory_at_once_one_runs_the_other_exits_2_at_once(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    result = run_entry("train", *DOCS_STYLE, *FAST, f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    command = [sys.executable, str(ROOT / "train.py"), f"resume={run}", "trainer.max_epochs=10"]
    resumes = [processes.start(command, cwd=ROOT, env=clean_env()) for _ in range(2)]
    while all(p.poll() is None for p in resumes):
        time.sleep(0.1)
    (loser,) = [p for p in resumes if p.poll() is not None]
    (winner,) = [p for p in resumes if p is not loser]
    assert winner.poll() is None  # the other one was refused while this one runs
    _, err = loser.communicate(timeout=60)
    message = one_paragraph_error(loser.returncode or 0, err)
    assert f"{run} is in use: another process holds its lock" in message
    _, err = winner.communicate(timeout=600)
    assert winner.returncode == 0, err[-3000:]
    assert len(list((run / ".hydra").glob("resume_*"))) == 1  # the refused one wrote nothing
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 9


@pytest.mark.slow
def test_under_ddp_the_launching_process_alone_holds_the_run_directory(tmp_path: Path) -> None:
    run, marker = tmp_path / "run", tmp_path / "paused"
    launcher = processes.start(
        [
            sys.executable,
            str(ROOT / "train.py"),
            *DOCS_STYLE,
            *FAST,
            "trainer.devices=2",
            f"hydra.run.dir={run}",
            "+callbacks.pause._target_=tests.machinery.fault_injection.PauseAtStep",
            "+callbacks.pause.step=3",
            f"+callbacks.pause.marker={marker}",
        ],
        cwd=ROOT,
        env=clean_env(),
        merge_stderr=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert launcher.poll() is None and time.monotonic() < deadline, launcher.output()
            time.sleep(0.2)
        inode = f":{run.stat().st_ino} "
        holders = [
            line.split()[4]
            for line in Path("/proc/locks").read_text().splitlines()
            if " FLOCK " in line and inode in line + " "
        ]
        assert holders == [str(launcher.pid)]  # one lock, the launcher's (rank 0's pid)
        assert marker.read_text().split()[0] == str(launcher.pid)
        code = run_entry("train", f"resume={run}").returncode
        assert code == 2
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=120)


def test_a_sweep_job_whose_directory_another_process_holds_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = tmp_path / "sweep"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(sweep / "0")],
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        args = ["-m", *DOCS_STYLE, "trainer.max_epochs=1", "seed=1,2", f"hydra.sweep.dir={sweep}"]
        code, err = run_main_in_process("train", args, tmp_path, monkeypatch)
        message = one_paragraph_error(code, err)
        assert f"{sweep / '0'} is in use" in message
        assert not (sweep / "0" / "checkpoints").exists() and not (sweep / "1").exists()
    finally:
        holder.kill()
        holder.wait()
