"""The one place every entry point passes through: registrations, Hydra, clear errors, signals.

Every entry point calls :func:`main`, which composes the config with Hydra and runs the task.
Bad input is one paragraph on stderr, exit status 2, and no run directory, wherever it is found:
the command line, Hydra (`hydra_errors.py`), the checks (a :class:`~..errors.UserError`), or the
build (`boundary.py`, which also tells the team's bug, keeping its traceback). SIGTERM and Ctrl-C
stop a job cleanly (`reliability/signals.py`), before it starts too. Secrets are masked on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import config_dir, shown_path
from ..distributed import at_stop_while_blocked, die_with_launcher, is_rank_zero
from ..errors import UserError, report, report_user_errors, user_error_in
from ..reliability import run_dir
from ..reliability.disk_full import disk_full_error
from ..reliability.requeue import exit_for_the_scheduler, requeue_signals
from ..reliability.secrets import mask_stderr
from . import run_data
from .hydra_errors import hydra_errors_as_user_errors

_early_signals: list[int] = []  # received before a job took over the signals


def register() -> None:
    """Register the ``dp`` and Hydra-aware ``ddp`` strategies (idempotent), and quiet what
    Lightning prints that is not about the run."""
    # Lightning 2.6's `_pytree.py` builds torch's deprecated `LeafSpec` on every step: a
    # FutureWarning in every run that nobody can act on.
    warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)`", FutureWarning)
    # Every Trainer logs an advertisement ("💡 Tip: ... litlogger"), with no switch to turn it off;
    # a stop logs "An SIGTERMException was raised" for Ctrl-C too (the run's own line follows).
    rank_zero_log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if _no_lightning_tips not in rank_zero_log.filters:
        rank_zero_log.addFilter(_no_lightning_tips)
    # Under SLURM, each process of each fit and test logs that Lightning sets its requeue
    # handler, which it does not: ours has the signal (`reliability/requeue.py`).
    signal_log = logging.getLogger("lightning.pytorch.trainer.connectors.signal_connector")
    if _no_false_requeue_note not in signal_log.filters:
        signal_log.addFilter(_no_false_requeue_note)
    from ..preflight.devices import quiet_srun_hint
    from ..strategies.registry import register_strategies

    quiet_srun_hint()
    register_strategies()


def _no_lightning_tips(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("💡 Tip:", "An SIGTERMException was raised"))


def _no_false_requeue_note(record: logging.LogRecord) -> bool:
    from ..reliability.requeue import requeue_signals

    said = record.msg == "SLURM auto-requeueing enabled. Setting signal handlers."
    return not (said and signal.SIGUSR1 in requeue_signals())


def with_trainer_arguments(overrides: Sequence[str]) -> list[str]:
    """Each ``trainer.X=V`` as ``++trainer.X=V`` (set, or add): any Trainer argument without
    Hydra's ``+``; the Trainer itself refuses one it does not take (`boundary.py`)."""
    return ["++" + o if re.match(r"trainer\.\w+=", o) else o for o in overrides]


def main(
    config_name: str,
    task: Callable[[DictConfig], Any],
    argv: Callable[[Sequence[str]], list[str]] | None = None,
) -> None:
    """Compose ``configs/<config_name>.yaml`` with the command line's overrides; run ``task``.
    ``argv`` rewrites the command line first (train.py's ``resume=RUN_DIR``)."""
    import hydra

    die_with_launcher()  # a DDP child: first thing, end with the process that started it
    mask_stderr()
    _early_signals.clear()
    with _handled(_before_the_run), exit_for_the_scheduler():
        _take_early_requeue_signals()
        sys.argv[1:] = report_user_errors(_command_line)(config_name, argv)
        with hydra_errors_as_user_errors():
            config_path = str(config_dir())
            hydra.main(version_base="1.3", config_path=config_path, config_name=config_name)(
                as_job(task)
            )()
        _said_after_finish(_early_signals)  # one that came as Hydra closed the finished job


def _before_the_run(signum: int, _frame: Any) -> None:
    _early_signals.append(signum)


_before_the_run.before_the_run = True  # type: ignore[attr-defined]


def _take_early_requeue_signals() -> None:
    """SLURM's requeue signal (`--signal=USR1@N`, sent up to a minute early) while Python imports
    and Hydra composes: a stop before the run began, as SIGTERM's is, then the requeue. Its
    default action killed the job (FAILED, exit 138). Left set: the run's handlers replace it."""
    if threading.current_thread() is threading.main_thread():
        for signum in requeue_signals():
            if signum == signal.SIGUSR1:  # submitit's SIGUSR2 is its own handler's
                signal.signal(signum, _before_the_run)


def _command_line(config_name: str, argv: Callable[[Sequence[str]], list[str]] | None) -> list[str]:
    args = with_trainer_arguments(sys.argv[1:] if argv is None else argv(sys.argv[1:]))
    args = run_data.for_the_run_data(config_name, args)
    run_dir.note_run_dirs_on_command_line(args)
    return args


@contextlib.contextmanager
def _handled(handler: Any = None) -> Iterator[None]:
    """``handler`` (if any) for SIGTERM and SIGINT inside, the previous handlers restored after
    (main thread only: only it may set them)."""
    main_thread = threading.current_thread() is threading.main_thread()
    signums = (signal.SIGTERM, signal.SIGINT) if main_thread else ()
    previous = {signum: signal.getsignal(signum) for signum in signums}
    for signum in previous if handler is not None else ():
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


def as_job(task: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
    """``task`` as a Hydra job: its run directory named at once; a UserError as one paragraph and
    its exit status, taking the run directory Hydra made with it (and, for bad input or a stop,
    whatever the run wrote before it held a result: `remove_untouched_run_dir`)."""

    @functools.wraps(task)
    def job(cfg: DictConfig) -> Any:
        _stop_if_signalled()
        output_dir = job_output_dir()
        named = [f"{cfg.get('task_name', 'run')}: {shown_path(output_dir)}"] if output_dir else []
        _run_dir_line[:] = named  # said once the job's checks have passed
        with exit_for_the_scheduler(), stop_signals(cfg):
            try:
                result = task(cfg)
                announce_run_dir()  # a task that said it at no point
            except Exception as error:
                user_error = user_error_in(error) or disk_full_error(error, job_output_dir())
                if user_error is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    # the team's bug: its traceback says what happened; a directory without a
                    # result (its config, logs) goes, as for bad input
                    remove_untouched_run_dir(nothing_kept=True, cfg=cfg)
                    _announce_if_kept()
                    raise
                if is_rank_zero() or not user_error.every_rank:
                    report(user_error)
                bad_input = user_error.exit_code == UserError.exit_code
                if bad_input:
                    _end_launched_processes()
                remove_untouched_run_dir(nothing_ran=bad_input, nothing_kept=bad_input, cfg=cfg)
                _run_dir_line.clear()  # refused before its checks passed: its Error alone
                sys.exit(user_error.exit_code)
            except SystemExit as stop:  # stopped by a signal (`execute.stops_cleanly`)
                if stop.code in _STOP_EXITS:
                    remove_untouched_run_dir(nothing_kept=True, cfg=cfg)
                _run_dir_line.clear()
                raise
        _said_after_finish(_after_finish)
        return result

    return job


_STOP_EXITS = tuple(128 + s for s in (signal.SIGTERM, signal.SIGINT))
_run_dir_line: list[str] = []  # the job's first line, `<task>: <its run directory>`


def announce_run_dir() -> None:
    """The job's first line, naming its run directory, once its checks have passed (before its
    config tree): a refused run, whose directory is removed, names none."""
    if _run_dir_line and is_rank_zero():
        print(_run_dir_line[0], flush=True)
    _run_dir_line.clear()


def _announce_if_kept() -> None:
    """A bug that ended the job before its first line: said where its directory is kept (its
    traceback follows)."""
    output_dir = job_output_dir()
    if output_dir and Path(output_dir).is_dir():
        announce_run_dir()
    _run_dir_line.clear()


def _end_launched_processes() -> None:
    """The processes a DDP run of this one started, ended (they write into its directory)."""
    if "torch" in sys.modules:
        from ..strategies.ddp import end_launched_job

        end_launched_job(succeeded=False, timeout=10.0)


def _said_after_finish(received: list[int]) -> None:
    """A stop signal that came once the run had finished: it is all there, said in one line. A
    requeue signal then has nothing to save or requeue: the job ends as the finished run it is."""
    received = [signum for signum in received if signum not in requeue_signals()]
    if not received:
        return
    if is_rank_zero():
        name = signal.Signals(received[0]).name.replace("SIGINT", "Ctrl-C")
        where = job_output_dir() or (_finished_dir[0] if _finished_dir else None)
        kept = f" in {shown_path(where)}" if where else ""
        print(
            f"\nStopped by {name} after the run had finished: nothing is lost; everything it "
            f"wrote is{kept}.",
            file=sys.stderr,
            flush=True,
        )
    sys.exit(128 + received[0])


_finished_dir: list[str] = []  # the directory of the job that finished last (for the line above)
_after_finish: list[int] = []  # a stop signal that came once the job's work was done


def _stop_if_signalled() -> None:
    """A stop signal that came before the job took over the signals: one line, no run directory."""
    if _early_signals:
        remove_untouched_run_dir(nothing_ran=True)
        run_dir.remove_untouched_sweep_dirs()
        if is_rank_zero():
            name = signal.Signals(_early_signals[0]).name.replace("SIGINT", "Ctrl-C")
            print(f"\nStopped by {name} before the run began; nothing is kept.", file=sys.stderr)
        sys.exit(128 + _early_signals[0])


@contextlib.contextmanager
def stop_signals(cfg: DictConfig | None = None) -> Iterator[None]:
    """SIGTERM and Ctrl-C as stop requests for the job's duration; one outside training (nothing
    to save) ends the job at once, with 128 + the signal number, keeping nothing of a run that
    held no result yet."""
    from ..reliability import signals

    def stopped_while_blocked(signum: int) -> None:  # the processes of a DDP run meeting
        removed = remove_untouched_run_dir(nothing_kept=True, cfg=cfg)
        if is_rank_zero():
            kept = " Nothing of the run is kept." if removed else ""
            message = f"{signals.stopped_message(signum, None, False)}{kept}"
            os.write(2, f"\n{message}\n\n".encode())

    unregister = at_stop_while_blocked(stopped_while_blocked)
    with _handled():
        signals.install_handlers()
        _stop_if_signalled()  # one that came while they were set up (importing Lightning)
        try:
            yield
            if output_dir := job_output_dir():
                _finished_dir[:] = [output_dir]
            signum = signals.requested_signal()  # one that came once the run had finished
            _after_finish[:] = [signum] if signum is not None else []
        except signals.StopRequested as stop:
            from ..strategies.ddp import end_launched_job

            end_launched_job(succeeded=False)
            removed = remove_untouched_run_dir(nothing_kept=not signals.has_finished(), cfg=cfg)
            if is_rank_zero():
                message = signals.stopped_message(stop.signum, None, False)
                message += " Nothing of the run is kept." if removed else ""
                print(f"\n{message}\n", file=sys.stderr)
            sys.exit(128 + stop.signum)
        finally:
            signals.forget_requests()
            unregister()


def job_output_dir() -> str | None:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else None


def remove_untouched_run_dir(
    nothing_ran: bool = False, nothing_kept: bool = False, cfg: DictConfig | None = None
) -> bool:
    """The run directory, if this process made it and it holds only Hydra's files (or, when
    ``nothing_kept``, anything but a result: a checkpoint, ``metrics.json``, the entry point's
    ``output_file``); else, when ``nothing_ran``, Hydra's record of this command (a
    `resume=`'s), if this process made it. Whether the directory was removed."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or not is_rank_zero():
        return False
    hydra_cfg = HydraConfig.get()
    record, output_dir = hydra_cfg.output_subdir, hydra_cfg.runtime.output_dir
    log_file = OmegaConf.select(hydra_cfg, "job_logging.handlers.file.filename")  # type: ignore[arg-type]
    hydra_files = [Path(record).parts[0]] if record else []
    hydra_files += [Path(log_file).name] if log_file else []
    if nothing_kept and not holds_a_result(Path(output_dir), cfg):
        hydra_files = [entry.name for entry in Path(output_dir).iterdir()]
    removed = run_dir.remove_if_untouched(output_dir, hydra_files)
    if not removed and nothing_ran and record:
        run_dir.remove_record_if_made_here(Path(output_dir) / record)
    return removed


def holds_a_result(folder: Path, cfg: DictConfig | None = None) -> bool:
    """Whether a run's directory holds something of value: a checkpoint, ``metrics.json``, or
    the file the entry point writes (``output_file``: predict's CSV, export's ONNX)."""
    if not folder.is_dir():
        return False
    output = cfg.get("output_file") if cfg is not None else None
    results = [folder / "metrics.json", *([folder / str(output)] if output else [])]
    return any(path.is_file() for path in results) or next(folder.rglob("*.ckpt"), None) is not None


# Before Hydra resolves a run directory: here, or where a launcher (submitit) unpickles a task.
run_dir.register_resolvers()
