"""Errors before and around a job as one paragraph and exit status 2, not a traceback.

A :class:`~..errors.UserError` is bad input; Hydra's own errors while it composes the config
(an option or a group that does not exist, a broken YAML file, a malformed override) and a run
directory that cannot be written are turned into one, in words that say what to type instead.
Errors raised by a job itself that are not UserErrors keep Hydra's report (exit status 1).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..config import config_dir
from ..errors import UserError
from ..reliability import run_dir

HELP_HINT = "`python {script} --help` lists the config groups and their options."
# The job wrapper of `entry.as_job`: errors whose traceback passes through it are the job's.
_JOB_FRAME = (f"{__package__}.entry", "job")


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
                user_error = user_error_in(error) or launcher_error(error) or as_user_error(error)
                if user_error is None:
                    raise
                report(user_error)
                run_dir.remove_untouched_sweep_dirs()
                sys.exit(user_error.exit_code)

        return original(explained)

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def launcher_error(error: Exception) -> UserError | None:
    """A Hydra launcher that cannot start the jobs (``-m hydra/launcher=slurm`` where there is
    no SLURM: submitit's ``Could not detect "srun"``) in one paragraph; None when ``error`` was
    not raised by a launcher."""
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(str(traceback.tb_frame.f_globals.get("__name__", "")))
        traceback = traceback.tb_next
    # A launcher plugin's own code (submitit's, joblib's); Hydra's basic launcher runs the jobs
    # here, and what fails in it (a run directory that cannot be made) is said otherwise.
    if not any(name.startswith("hydra_plugins.") and "launcher" in name for name in frames):
        return None
    typed = next(
        (f"`{a}`" for a in sys.argv[1:] if a.lstrip("+").startswith("hydra/launcher=")),
        "The launcher",
    )
    complaint = " ".join(f"{type(error).__name__}: {error}".split())
    end = "" if complaint.endswith((".", "?", "!")) else "."
    return UserError(
        f"{typed} cannot start the jobs: {complaint}{end} Run the command where that launcher "
        "works (e.g. a SLURM cluster's login node for `hydra/launcher=slurm`), or leave "
        "`hydra/launcher=...` out to run the jobs here, one after another."
    )


def raised_in_job(error: BaseException) -> bool:
    """Whether ``error`` came out of a job (its traceback passes through `as_job`)."""
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) == _JOB_FRAME:
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
    if isinstance(error, MissingConfigException) and error.missing_cfg_file:
        return UserError(_missing_option(error, script))
    yaml_error = next((e for e in _chain(error) if isinstance(e, yaml.YAMLError)), None)
    if yaml_error is not None:
        return UserError(describe_yaml_error(yaml_error))
    unknown_key = _not_in_struct(error, script)
    if unknown_key is not None:
        return UserError(unknown_key)
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


def _not_in_struct(error: Exception, script: str) -> str | None:
    """An override of a key the config does not have (``trainer.max_epoch=3``,
    ``model.lrr=0.1``): the closest keys there, and for the trainer its arguments. Hydra's own
    advice, ``+key=...``, adds the key, which for a typo is never what was meant (the Trainer
    or the model then fails on an argument it does not take)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        return None
    if "not in struct" not in str(cause) or getattr(cause, "parent_node", None) is None:
        return None
    full_key, key = str(cause.full_key), str(cause.key)
    parent = full_key[: -len(key) - 1] if full_key.endswith("." + key) else ""
    if not parent and _close_group(f"Could not override '{key}'"):
        return None  # a misspelt config group (`expriment=...`): said below
    names = [str(k) for k in cause.parent_node if not str(k).startswith("_")]
    where = f"under `{parent}`" if parent else "at the top"
    added = f" To add a new key, write `+{full_key}=...`."
    if parent == "trainer":
        from .trainer_arguments import trainer_parameters

        names = sorted(set(names) | trainer_parameters())
        where = "under `trainer`, and `lightning.Trainer` takes no such argument"
        added = ""
    close = difflib.get_close_matches(key, names, n=3)
    dotted = [f"`{parent}.{name}`" if parent else f"`{name}`" for name in close]
    hint = f" Did you mean {' or '.join(dotted)}?" if close else ""
    return (
        f"`{full_key}`: the config has no key `{key}` {where}.{hint}{added} "
        f"{HELP_HINT.format(script=script)}"
    )


def _missing_option(error: Any, script: str) -> str:
    group, _, name = str(error.missing_cfg_file).rpartition("/")
    # A list of options (`logger=[csv,wandbb]`) comes without them: they are looked up here.
    found = error.options if error.options is not None else group_options(group)
    options = sorted(str(option) for option in found)
    close = [o for o in options if o.lower() == name.lower()] or difflib.get_close_matches(
        name, options, n=1
    )
    typed, suggested = f"{group}={name}", f"{group}={close[0]}" if close else ""
    as_list = _typed_list(group, name)
    if as_list is not None:  # `logger=[csv,wandbb]`: the option is one of a list
        typed = f"{group}=[{','.join(as_list)}]"
        suggested = (
            suggested and f"{group}=[{','.join(close[0] if o == name else o for o in as_list)}]"
        )
    hint = f" Did you mean `{suggested}`?" if suggested else ""
    listed = ", ".join(options) or "none"
    return (
        f"`{typed}`: the config group `{group}` has no option `{name}` (no file "
        f"configs/{group}/{name}.yaml).{hint} Its options: {listed}. "
        f"{HELP_HINT.format(script=script)}"
    )


def _typed_list(group: str, name: str) -> list[str] | None:
    """The options of a `group=[a,b]` override on the command line that holds ``name``."""
    for arg in sys.argv[1:]:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") == group and value.startswith("[") and value.endswith("]"):
            options = [o.strip() for o in value[1:-1].split(",")]
            if name in options:
                return options
    return None


def group_options(group: str) -> list[str]:
    """The options of a config group, wherever Hydra finds them (its search path); the
    project's configs/ folder when Hydra is not running."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        loader = GlobalHydra.instance().config_loader()
        return list(loader.get_group_options(group))
    folder = config_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


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
