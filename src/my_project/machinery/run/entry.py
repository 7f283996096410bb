"""The one place every entry point passes through: registrations, Hydra, clear errors.

`python train.py`, `eval.py`, `predict.py` (and their console scripts) call :func:`main`:
it composes the config with Hydra and runs the task (train, evaluate, predict). Each task
begins with :func:`register`, so the names the configs and the Trainer look up resolve however
the task is called (from the command line, a test, a notebook).

Bad input is one paragraph on stderr and exit status 2, and leaves no run directory, wherever
it is found: on the command line (`resume=`, a `--config-dir` with a broken YAML file, a run
directory under a file), while Hydra composes the config (an option or group that does not
exist, a broken YAML file, a malformed override), or in the task's checks (a
:class:`~..errors.UserError`). Secrets are masked in everything written to stderr.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig

from ..config import config_dir
from ..distributed import is_rank_zero
from ..errors import UserError
from ..reliability import run_dir
from ..reliability.run_dir import register_resolvers
from ..reliability.secrets import mask_stderr, protect_run_secrets

HELP_HINT = "`python {script} --help` lists the config groups and their options."


def register() -> None:
    """Make the names the configs and the Trainer use resolvable (idempotent).

    - ``${unique_dir:...}`` in configs/hydra (the run directory);
    - ``trainer.strategy=dp`` and the Hydra-aware ``ddp`` in Lightning's StrategyRegistry.
    """
    register_resolvers()
    from ..strategies.registry import register_strategies

    register_strategies()


def main(
    config_name: str,
    task: Callable[[DictConfig], Any],
    argv: Callable[[Sequence[str]], list[str]] | None = None,
) -> None:
    """Compose ``configs/<config_name>.yaml`` with the command line's overrides; run ``task``.

    ``argv`` rewrites the command line first (train.py's ``resume=RUN_DIR``).
    """
    import hydra

    mask_stderr()
    register_resolvers()  # before Hydra resolves the run directory
    with exit_on_user_error():
        args = list(sys.argv[1:]) if argv is None else argv(sys.argv[1:])
        check_command_line(args)
    sys.argv[1:] = args
    with hydra_errors_as_user_errors():
        hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)(
            as_job(task)
        )()


def check_command_line(args: Sequence[str]) -> None:
    """What Hydra would pass over or fail on late: a broken YAML file in a ``--config-dir``
    (Hydra reads only the files a run selects, and the project's configs come first), and a
    run directory that cannot be created."""
    from hydra._internal.utils import get_args_parser

    parsed, _ = get_args_parser().parse_known_args(list(args))
    if parsed.config_dir:
        check_yaml_files(Path(parsed.config_dir))
    run_dir.note_run_dirs_on_command_line(parsed.overrides or [])


def check_yaml_files(folder: Path) -> None:
    """Every YAML file under ``folder`` parses; the first that does not is a UserError."""
    import yaml
    from omegaconf import OmegaConf

    for path in sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")]):
        try:
            OmegaConf.load(path)
        except yaml.YAMLError as error:
            raise UserError(describe_yaml_error(error, path)) from error


def describe_yaml_error(error: Exception, path: Path | str | None = None) -> str:
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    name = path or (mark.name if mark is not None else "a config file")
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{name} is not valid YAML: {problem}{where}. Fix the file, or remove it."


def as_job(task: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
    """``task`` as a Hydra job: secrets masked in Hydra's record first; SIGTERM and Ctrl-C
    stop it cleanly (`reliability/signals.py`); a UserError becomes one paragraph and its exit
    status, and takes the run directory Hydra made with it."""

    @functools.wraps(task)
    def job(cfg: DictConfig) -> Any:
        with stop_signals():
            try:
                if is_rank_zero():
                    protect_run_secrets(cfg)
                return task(cfg)
            except Exception as error:
                user_error = user_error_in(error)
                if user_error is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                report(user_error)
                remove_untouched_run_dir()
                sys.exit(user_error.exit_code)

    return job


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and Ctrl-C as stop requests for the job's duration; one that arrives outside
    training (nothing to save) ends the job at once with 128 + the signal number."""
    from ..reliability import signals

    previous = {signum: signal.getsignal(signum) for signum in signals.STOP_SIGNALS}
    signals.install_handlers()
    try:
        yield
    except signals.StopRequested as stop:
        from ..strategies.ddp import end_launched_job

        end_launched_job(succeeded=False)
        if is_rank_zero():
            print(f"\n{signals.stopped_message(stop.signum, None, False)}\n", file=sys.stderr)
        sys.exit(128 + stop.signum)
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in previous.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def remove_untouched_run_dir() -> None:
    """The run directory, if this process made it and it holds only Hydra's own files."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized() or not is_rank_zero():
        return
    hydra_cfg = HydraConfig.get()
    hydra_files = []
    if hydra_cfg.output_subdir is not None:
        hydra_files.append(Path(hydra_cfg.output_subdir).parts[0])
    log_file = OmegaConf.select(cast(DictConfig, hydra_cfg), "job_logging.handlers.file.filename")
    if log_file:
        hydra_files.append(Path(log_file).name)
    run_dir.remove_if_untouched(hydra_cfg.runtime.output_dir, hydra_files)


def report(error: UserError) -> None:
    print(f"\nError: {error}\n", file=sys.stderr, flush=True)


def user_error_in(error: BaseException) -> UserError | None:
    """``error`` if it is a UserError, or the one behind it: Hydra's ``instantiate`` and
    OmegaConf's resolvers wrap what a constructor or a resolver raises."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, UserError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def exit_on_user_error() -> Iterator[None]:
    try:
        yield
    except UserError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        report(error)
        sys.exit(error.exit_code)


@contextlib.contextmanager
def hydra_errors_as_user_errors() -> Iterator[None]:
    """Hydra's own errors before a job runs (an option that does not exist, a broken YAML
    file, a malformed override) as one paragraph and exit status 2, instead of Hydra's report
    and exit status 1.

    Hydra has no hook for this: every step of its command line runs inside its
    ``run_and_report``, which prints and exits 1. That function is wrapped for the duration;
    errors raised by a job itself still get Hydra's report.
    """
    import hydra._internal.utils as hydra_utils

    original = hydra_utils.run_and_report

    def run_and_report(func: Callable[[], Any]) -> Any:
        def explained() -> Any:
            try:
                return func()
            except Exception as error:
                if raised_in_job(error) or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                user_error = user_error_in(error) or as_user_error(error)
                if user_error is None:
                    raise
                report(user_error)
                sys.exit(user_error.exit_code)

        return original(explained)

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def raised_in_job(error: BaseException) -> bool:
    """Whether ``error`` came out of a job (its traceback passes through `as_job`)."""
    traceback = error.__traceback__
    while traceback is not None:
        if (
            traceback.tb_frame.f_code.co_name == "job"
            and traceback.tb_frame.f_globals.get("__name__") == __name__
        ):
            return True
        traceback = traceback.tb_next
    return False


def as_user_error(error: Exception) -> UserError | None:
    """Hydra's and OmegaConf's errors in composing the config, and a run directory that
    cannot be written, in one paragraph; None for anything else."""
    import yaml
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    script = Path(sys.argv[0]).name
    if isinstance(error, MissingConfigException) and error.options is not None:
        return UserError(_missing_option(error, script))
    yaml_error = next((e for e in _chain(error) if isinstance(e, yaml.YAMLError)), None)
    if yaml_error is not None:
        return UserError(describe_yaml_error(yaml_error))
    if isinstance(error, (HydraException, OmegaConfBaseException)):
        message = _one_paragraph(str(error))
        cause = error.__cause__
        if isinstance(cause, OmegaConfBaseException) and str(cause).strip():
            first, dot, rest = message.partition(". ")
            message = f"{first} ({str(cause).splitlines()[0].strip()}){dot}{rest}"
        if not message.endswith("."):
            message += "."
        return UserError(f"{message}{_close_group(message)} {HELP_HINT.format(script=script)}")
    if isinstance(error, OSError) and error.filename:
        return UserError(
            f"Cannot write {error.filename}: {error.strerror}. Choose a place this user can "
            "write to, e.g. `paths.log_dir=logs` or `hydra.run.dir=logs/train/runs/mine`."
        )
    return None


def _missing_option(error: Any, script: str) -> str:
    group, _, name = str(error.missing_cfg_file).rpartition("/")
    options = sorted(str(option) for option in error.options)
    close = difflib.get_close_matches(name, options, n=1)
    hint = f" Did you mean `{group}={close[0]}`?" if close else ""
    listed = ", ".join(options) or "none"
    return (
        f"`{group}={name}`: the config group `{group}` has no option `{name}` (no file "
        f"configs/{group}/{name}.yaml).{hint} Its options: {listed}. "
        f"{HELP_HINT.format(script=script)}"
    )


def _close_group(message: str) -> str:
    """ " Did you mean `experiment=...`?" when Hydra could not override a misspelt group."""
    match = re.search(r"Could not override '([^'.]+)'", message)
    if match is None:
        return ""
    groups = sorted(
        str(folder.relative_to(config_dir()))
        for folder in config_dir().rglob("*")
        if folder.is_dir() and any(folder.glob("*.yaml"))
    )
    close = difflib.get_close_matches(match[1], groups, n=1)
    return f" Did you mean the config group `{close[0]}`?" if close else ""


def _one_paragraph(message: str) -> str:
    """Hydra's multi-line message, without its dump of the config search path."""
    lines = message.split("Config search path:")[0].splitlines()
    return " ".join(line.strip() for line in lines if line.strip())


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# Hydra launchers that run jobs in other processes (submitit) unpickle the task function,
# which imports this module there: the resolvers must exist before they resolve the job's
# run directory.
register_resolvers()
