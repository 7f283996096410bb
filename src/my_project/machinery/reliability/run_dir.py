"""Run directories that never collide, hold one run each, and that bad input never leaves behind.

``${unique_dir:PATH}`` creates ``PATH``, or ``PATH_1``, ``PATH_2``... with ``os.mkdir``, which
fails rather than reuse a directory another process just created.

Hydra makes the run directory before the task runs: :func:`remove_if_untouched` removes it again
after a refusal, if this process created it and it holds nothing but Hydra's files.

One run a directory (:class:`RunDirLock`, a Hydra callback): a new run refuses a directory that
holds a run, and a run holds an OS lock (``flock``) on its directory for its whole life, which
the OS releases however the process ends (``kill -9`` too): a second process is refused.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, read_write

from ..distributed import LAUNCHER_PID, is_rank_zero, srun_task_step
from ..errors import UserError
from . import requeue

_created: dict[str, str] = {}  # unique_dir's answers
_made_here: set[Path] = set()  # the outermost folders this process created (or is about to)
_made_by_unique_dir: list[Path] = []  # its answers' folders, which it made
_RUN_DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
_RUN_FILES = (".hydra", "checkpoints", "metrics.json")  # a directory with one holds a run
_SWEEP_FILES = ("multirun.yaml", ".submitit", ".hydra")  # what a sweep holds before its jobs
_held: list[int] = []  # the lock this process holds: one run directory at a time


def unique_dir(prefix: str, _root_: Any = None) -> str:
    """Create and return ``prefix`` or the first free ``prefix_N``; in a task srun started, the
    folder named for its job step beside it (`job_step_dir`)."""
    if prefix in _created:
        return _created[prefix]
    log_dir = OmegaConf.select(_root_, "paths.log_dir", default=None) if _root_ else None
    if isinstance(log_dir, str) and not log_dir.strip():  # an environment variable set empty?
        raise UserError(
            "paths.log_dir is empty (an environment variable set, but empty?), so runs would be "
            "written under the filesystem's root (/train/runs/...). Give it a folder, e.g. "
            "`paths.log_dir=logs`, or unset the variable to use logs/."
        )
    if os.environ.get(LAUNCHER_PID):  # a DDP child: told its run directory, needs no other
        return prefix
    note_new_folder(Path(prefix).parent, "paths.log_dir")
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    if (step := srun_task_step()) is not None:
        _created[prefix] = job_step_dir(Path(prefix).parent, step)
        return _created[prefix]
    if not _made_by_unique_dir:
        atexit.register(remove_the_empty_ones)
    for n in itertools.count():
        candidate = prefix if n == 0 else f"{prefix}_{n}"
        with contextlib.suppress(FileExistsError):
            os.mkdir(candidate)
            _created[prefix] = candidate
            _made_here.add(Path(candidate).absolute())
            _made_by_unique_dir.append(Path(candidate).absolute())
            return candidate
    raise AssertionError("unreachable")


def remove_the_empty_ones() -> None:
    """At exit: the folders ``unique_dir`` made that are still empty, and the folders this
    process made around them, if that leaves them empty. Hydra resolves a config's run and sweep
    directories again whenever a merge meets them (a config setting a key that interpolates
    one to null), each time at a new ``${now:}``: the folders of the answers not used."""
    for folder in _made_by_unique_dir:
        for empty in (folder, *folder.parents):
            if not _made_by_this_process(empty):
                break
            try:
                empty.rmdir()  # only if empty: a run started there meanwhile stays
            except FileNotFoundError:  # removed already (a refusal's): its parents may be empty
                continue
            except OSError:
                break


def job_step_dir(parent: Path, step: str) -> str:
    """``parent/slurm-<job>[.<step>]``: every task of an srun step composes its own config, at
    its own time, and a requeued job runs its steps again: they all name this one folder."""
    folder = parent / f"slurm-{step}"
    if not folder.is_dir() or not any(folder.iterdir()):  # empty: another task's, just made
        _made_here.add(folder.absolute())
    folder.mkdir(exist_ok=True)
    return str(folder)


def register_resolvers() -> None:
    """Make ``${unique_dir:...}`` available to the configs (idempotent; not cached by OmegaConf,
    which cannot cache a resolver given `_root_`: `_created` remembers)."""
    OmegaConf.register_new_resolver("unique_dir", unique_dir, replace=True)


def note_new_folder(path: Path, key: str = "hydra.run.dir") -> None:
    """Remember the outermost folder of ``path`` that does not exist yet (about to be made, so
    it may be removed again); a UserError when a file sits where one of them would be."""
    chain = [Path(path).expanduser().absolute(), *Path(path).expanduser().absolute().parents]
    missing = list(itertools.takewhile(lambda folder: not folder.exists(), chain))
    if not chain[len(missing)].is_dir():
        raise UserError(
            f"The run directory {path} cannot be created: {chain[len(missing)]} is a file. "
            f"Choose another place, e.g. `{key}=logs` or `hydra.run.dir=logs/train/runs/mine`."
        )
    if missing:
        _made_here.add(missing[-1])


def note_run_dirs_on_command_line(overrides: Sequence[str]) -> None:
    """Check a ``hydra.run.dir`` or ``hydra.sweep.dir`` of the command line, and remember
    whether it exists already (only one this process creates may be removed again)."""
    for override in overrides:
        key, sep, value = override.partition("=")
        key, value = key.lstrip("+"), value.strip().strip("'\"")
        if sep and key in _RUN_DIR_KEYS and not value:
            raise UserError(
                f"`{key}=` is empty, so the run would be written into the current directory "
                f"({Path.cwd()}). Name a folder, e.g. `{key}=logs/train/runs/mine`, or leave it "
                "out for a new one under logs/."
            )
        if sep and key in _RUN_DIR_KEYS and "${" not in value:
            note_new_folder(Path(value), key)


def _made_by_this_process(path: Path) -> bool:
    return any(folder in _made_here for folder in (path, *path.parents))


def remove_untouched_sweep_dirs() -> None:
    """The directories ``unique_dir`` made that hold only what a sweep writes before its jobs."""
    for made in list(_created.values()):
        remove_if_untouched(made, _SWEEP_FILES)


def remove_if_untouched(run_dir: str | Path, hydra_files: Sequence[str]) -> bool:
    """Remove ``run_dir`` if this process created it and it holds only ``hydra_files``, then the
    folders this process made around it, if left empty but for a sweep's record."""
    run_dir = Path(run_dir).absolute()
    if not run_dir.is_dir() or not _made_by_this_process(run_dir):
        return False
    if any(entry.name not in (*hydra_files, requeue.LAUNCH_FILE) for entry in run_dir.iterdir()):
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    for folder in run_dir.parents:
        if not _made_by_this_process(folder) or any(
            entry.name != _SWEEP_FILES[0] for entry in folder.iterdir()
        ):
            break
        with contextlib.suppress(OSError):
            (folder / _SWEEP_FILES[0]).unlink(missing_ok=True)
            folder.rmdir()  # only if empty: a run started beside it meanwhile stays
    return True


def remove_record_if_made_here(record: Path) -> None:
    """Remove Hydra's record of this command (a `resume=`'s), if this process made it."""
    if Path(record).absolute() in _made_here:
        shutil.rmtree(record, ignore_errors=True)


class RunDirLock(Callback):
    """Hydra callback: each job's directory claimed before the job writes there, by rank 0; a
    restart of the job that ran the run there continues it (`requeue.py`)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            run_dir = Path(str(config.hydra.run.dir)).absolute()
        except Exception:  # Hydra says what is wrong with it, as it makes the directory
            return
        task = str(config.get("task_name", ""))
        restarted = requeue.decide(run_dir, task)  # on every rank, before rank 0 writes there
        resumed = config.get("resume")  # train.py's resume=<run dir> continues that run
        new = not restarted and (not resumed or Path(str(resumed)).absolute() != run_dir)
        if is_rank_zero():
            if restarted and config.hydra.output_subdir and (run_dir / ".hydra").is_dir():
                _record_beside_the_runs(config, run_dir)
            _claim_or_exit(run_dir, _RUN_FILES if new else (), task)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        # A sweep's job: Hydra has written its .hydra/ already; checkpoints are a run's.
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        output_dir = Path(config.hydra.runtime.output_dir)
        restarted = requeue.decide(output_dir, str(config.get("task_name", "")))
        if is_rank_zero():
            _claim_or_exit(output_dir, () if restarted else _RUN_FILES[1:], "")

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        release()


def _record_beside_the_runs(config: DictConfig, run_dir: Path) -> None:
    """Hydra's record of a restart in `.hydra/resume_<time>/`, as `resume=` puts it, keeping
    the run's own."""
    subdir = f".hydra/resume_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    note_new_folder(run_dir / subdir)
    with read_write(config.hydra):
        config.hydra.output_subdir = subdir


def _claim_or_exit(run_dir: Path, refused: Sequence[str], task: str) -> None:
    try:
        claim(run_dir, refused, task)
    except UserError as error:  # Hydra turns what a callback raises into a warning
        print(f"\nError: {error}\n", file=sys.stderr, flush=True)
        sys.exit(error.exit_code)
    requeue.record_launch(run_dir)


def claim(run_dir: Path, refused: Sequence[str], task: str) -> None:
    """Lock ``run_dir`` for this process (``flock`` on the directory itself: no file to write,
    none left behind), giving up one it holds already. A UserError, with nothing written, when
    another process holds it, or when it holds one of ``refused``."""
    release()
    run_dir.mkdir(parents=True, exist_ok=True)  # as Hydra would, next
    if os.name == "posix":
        import fcntl

        _held.append(os.open(run_dir, os.O_RDONLY))
        try:
            fcntl.flock(_held[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            release()
            raise UserError(in_use_message(run_dir)) from error
        except OSError:  # a filesystem without locks (some network ones): the run goes unlocked
            release()
    found = [name for name in refused if (run_dir / name).exists()]
    step = srun_task_step()
    if found and step is not None and run_dir.name == f"slurm-{step}":
        release()  # named for this job, not chosen: the cluster gave a job id a second time
        resume = (
            f"continue it with `python train.py resume={run_dir}`, or " if task == "train" else ""
        )
        raise UserError(
            f"{run_dir} holds a run already ({', '.join(found)}), of an earlier SLURM job with "
            f"this job's id ({step}): SLURM reuses job ids (numbering starts again when its "
            "controller starts afresh), and a new run there would overwrite that one. Move the "
            f"earlier run away ({resume}nothing of it is lost), or name this job's directory "
            "(`hydra.run.dir=logs/train/runs/<name>` on the srun line)."
        )
    if found:
        release()
        resume = f"Continue it with `python train.py resume={run_dir}`, or c"
        raise UserError(
            f"{run_dir} holds a run already ({', '.join(found)}), which a new run there would "
            f"overwrite. {resume if task == 'train' else 'C'}hoose another directory for the "
            "new one (leave `hydra.run.dir` and `hydra.sweep.dir` out for one under logs/)."
        )


def in_use_message(run_dir: Path) -> str:
    return (
        f"{run_dir} is in use: another process holds its lock, and two processes writing "
        "one run directory would mix their checkpoints, metrics and logs. Wait for it to "
        "end (or stop it), or choose another directory (leave `hydra.run.dir` out for a "
        "new one under logs/)."
    )


def held_by_another_process(run_dir: Path) -> bool:
    """Whether another process holds ``run_dir`` (:func:`claim`), found without holding it."""
    if os.name != "posix" or not run_dir.is_dir():
        return False
    found = run_dir.stat()
    for held in _held:  # this process's own (an earlier job's, in a notebook or a test)
        if (os.fstat(held).st_dev, os.fstat(held).st_ino) == (found.st_dev, found.st_ino):
            return False
    import fcntl

    handle = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # a filesystem without locks
        return False
    finally:
        os.close(handle)  # closing the descriptor gives up a lock it took
    return False


def release() -> None:
    """Give up the run directory this process holds, if any (the OS does it at exit)."""
    while _held:
        os.close(_held.pop())
