"""Hydra's own errors, before a job runs, as one paragraph and exit status 2.

What Hydra refuses while it reads the command line, composes the config, makes the run
directory and its log file, or starts a launcher (an option or key that does not exist, a broken
YAML file, a malformed override, a place it cannot write) is bad input: Hydra's own message on
one line, and where to see the options, instead of its report and exit status 1. A misspelt key
gets the closest keys there (Hydra's advice, ``+key=...``, adds it: for a typo, never what was
meant). Errors of a job itself pass through (`entry.as_job` has said its bad input already).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..config import config_dir
from ..errors import UserError, causes, report, user_error_in
from ..reliability import run_dir

_JOB_FRAME = (f"{__package__}.entry", "job")  # `entry.as_job`'s wrapper: the job's own errors


@contextlib.contextmanager
def hydra_errors_as_user_errors() -> Iterator[None]:
    """Hydra's errors before (and around) the job as one paragraph, for the duration.

    Hydra has no public hook for how it reports errors: every step of its command line runs
    inside ``hydra._internal.utils.run_and_report`` (looked up on its module at each call),
    which prints and exits 1. That function is wrapped here (private: hydra-core 1.3)."""
    import hydra._internal.utils as hydra_utils

    original = hydra_utils.run_and_report

    def run_and_report(func: Callable[[], Any]) -> Any:
        def explained() -> Any:
            try:
                return func()
            except Exception as error:
                if raised_in_job(error) or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                user_error = explain(error)
                if user_error is None:  # not Hydra's refusal: its report, with the traceback
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


def _frames(error: BaseException) -> list[str]:
    """The modules of the frames ``error`` passed through, innermost last."""
    names, traceback = [""], error.__traceback__
    while traceback is not None:
        names.append(str(traceback.tb_frame.f_globals.get("__name__", "")))
        traceback = traceback.tb_next
    return names


def raised_in_job(error: BaseException) -> bool:
    """Whether ``error`` came out of a job (its traceback passes through `entry.as_job`)."""
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) == _JOB_FRAME:
            return True
        traceback = traceback.tb_next
    return False


def explain(error: Exception) -> UserError | None:
    """What Hydra refused, in one paragraph; None for an error raised elsewhere than in Hydra,
    OmegaConf, a YAML file or the file system (a bug of a plugin or a callback)."""
    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    script = Path(sys.argv[0]).name
    hint = f"`python {script} --help` lists the config groups and their options."
    chain = list(causes(error))
    if (found := user_error_in(error)) is not None:
        return found
    if any(name.startswith("hydra_plugins.") and "launcher" in name for name in _frames(error)):
        typed = next((f"`{a}`" for a in sys.argv[1:] if "hydra/launcher=" in a), "The launcher")
        return UserError(
            f"{typed} cannot start the jobs: {' '.join(f'{type(error).__name__}: {error}'.split())} "
            "Run the command where that launcher works (e.g. a SLURM cluster's login node for "
            "`hydra/launcher=slurm`), or leave `hydra/launcher=...` out to run the jobs here."
        )
    if (yaml_error := next((e for e in chain if isinstance(e, yaml.YAMLError)), None)) is not None:
        return UserError(describe_yaml_error(yaml_error))
    if (
        os_error := next((e for e in chain if isinstance(e, OSError) and e.filename), None)
    ) is not None:
        return UserError(  # a run directory or log file in a place this user cannot write
            f"Cannot write {os_error.filename}: {os_error.strerror}. Choose a place this user "
            "can write to, e.g. `paths.log_dir=logs` or `hydra.run.dir=logs/train/runs/mine`; to "
            "resume a run stored where it cannot be written, resume a copy of its directory."
        )
    if (unknown_key := _not_in_struct(error)) is not None:
        return UserError(f"{unknown_key} {hint}")
    text = str(error).split("Config search path:")[0].replace(":\n\t", ": ").replace("\n\t", ", ")
    message = " ".join(text.split())
    cause = str(error.__cause__ or "").strip().splitlines()
    if cause and cause[0] not in message:
        message += f" ({cause[0].strip()})"
    if not isinstance(error, (HydraException, OmegaConfBaseException)):
        if not _frames(error)[-1].startswith(("hydra.", "omegaconf.")):
            return None
        message = f"The command line cannot be read: {type(error).__name__}: {message}"
    return UserError(f"{message}{'' if message.endswith('.') else '.'} {hint}")


def describe_yaml_error(error: Exception, path: Path | str | None = None) -> str:
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    name = path or (mark.name if mark is not None else "a config file")
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{name} is not valid YAML: {problem}{where}. Fix the file, or remove it."


def _not_in_struct(error: Exception) -> str | None:
    """An override of a key the config does not have (``trainer.max_epoch=3``), with the
    closest keys there (config groups too, at the top: ``expriment=...``)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)) or "not in struct" not in str(
        cause
    ):
        return None
    if getattr(cause, "parent_node", None) is None:
        return None
    full_key, key = str(cause.full_key), str(cause.key)
    parent = full_key[: -len(key) - 1] if full_key.endswith("." + key) else ""
    names = [str(k) for k in cause.parent_node if not str(k).startswith("_")]
    names += [f.name for f in config_dir().iterdir() if f.is_dir()] if not parent else []
    close = [
        f"`{parent}.{n}`" if parent else f"`{n}`" for n in difflib.get_close_matches(key, names)
    ]
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    where = f"under `{parent}`" if parent else "at the top"
    return (
        f"`{full_key}`: the config has no key `{key}` {where}.{hint} To add a new key, write "
        f"`+{full_key}=...`."
    )
