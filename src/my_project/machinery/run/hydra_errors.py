"""Hydra's own errors, before a job runs, as one paragraph and exit status 2.

What fails while Hydra reads the command line, composes the config, makes the run directory or
starts a launcher (a key that does not exist, broken YAML, a place it cannot write) is bad input:
the error's own message on one line, a misspelt key with the closest keys. A job's own errors
pass through (`entry.as_job` has said its bad input already), and so does a bug raised in the
team's own code (a Hydra callback of theirs), with its traceback.
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

from .. import hydra_compat
from ..config import config_dir
from ..errors import UserError, causes, report, user_error_in
from ..fault import teams_bug
from ..preflight.key_hints import key_hint
from ..reliability import run_dir

_JOB_FRAME = (f"{__package__}.entry", "job")  # `entry.as_job`'s wrapper: the job's own errors


@contextlib.contextmanager
def hydra_errors_as_user_errors() -> Iterator[None]:
    """Hydra's errors around the job as one paragraph, for the duration (Hydra has no public hook
    for them: `hydra_compat.errors_reported_by`)."""

    def explained(func: Callable[[], Any]) -> Callable[[], Any]:
        def step() -> Any:
            try:
                return func()
            except Exception as error:
                if raised_in_job(error) or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                if teams_bug(error) is not None:  # a bug of the team's Hydra callback or plugin
                    raise
                user_error = explain(error)
                report(user_error)
                run_dir.remove_untouched_sweep_dirs()
                sys.exit(user_error.exit_code)

        return step

    with hydra_compat.errors_reported_by(explained):
        yield


def raised_in_job(error: BaseException) -> bool:
    """Whether ``error`` came out of a job (its traceback passes through `entry.as_job`)."""
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) == _JOB_FRAME:
            return True
        traceback = traceback.tb_next
    return False


def explain(error: Exception) -> UserError:
    """What was refused before the job, in one paragraph: the error's own words."""
    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if (found := user_error_in(error)) is not None:
        return found
    if _HYDRA_OPTUNA_SWEEPER in str(error):
        return UserError(foreign_optuna_sweeper())
    if (unreadable := _unreadable_override()) is not None:
        override, problem = unreadable
        shown = (
            override if len(override) <= 60 else f"{override[:40]}... ({len(override)} characters)"
        )
        key = override.split("=", 1)[0].lstrip("+~")
        return UserError(
            f"`{shown}` cannot be read: {problem} Fix the value of `{key}` on the command line."
        )
    if (
        yaml_error := next((e for e in causes(error) if isinstance(e, yaml.YAMLError)), None)
    ) is not None:
        return UserError(describe_yaml_error(yaml_error))
    text = str(error).split("Config search path:")[0].replace(":\n\t", ": ").replace("\n\t", ", ")
    if closest := _closest_keys(error):  # then Hydra's advice to add the key (`+key=`) misleads
        text = re.sub(r"\.?\n?To append to your config use \+.*", "", text)
    message = " ".join(text.split())
    cause = str(error.__cause__ or "").strip().splitlines()
    if cause and cause[0] not in message:
        message += f" ({cause[0].strip()})"
    message += "" if message.endswith((".", "?", "!")) else "."
    if not isinstance(error, (HydraException, OmegaConfBaseException)):
        return UserError(f"{type(error).__name__}: {message}")  # a launcher's, the OS's
    script = Path(sys.argv[0]).name
    return UserError(
        f"{message}{closest} `python {script} --help` lists the config groups and their options."
    )


# The class hydra-optuna-sweeper's config names (lightning-hydra-template's hparams_search).
_HYDRA_OPTUNA_SWEEPER = "hydra_plugins.hydra_optuna_sweeper."


def foreign_optuna_sweeper() -> str:
    """Hydra's "Unknown plugin class" for a search config written for hydra-optuna-sweeper,
    which this project does not install: what to change for its own sweeper, which reads the
    same keys."""
    named = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("hparams_search=")]
    where = f"configs/hparams_search/{named[-1]}.yaml" if named else "the hparams_search config"
    return (
        f"{where} sets `hydra.sweeper._target_` to hydra-optuna-sweeper's OptunaSweeper "
        "(as lightning-hydra-template's searches do), which this project does not install. "
        "Its own Optuna sweeper, which `- override /hydra/sweeper: optuna` in the file's "
        "defaults already picks, reads the same `direction`, `n_trials`, `storage`, "
        "`study_name`, `sampler` and `params` (and `n_jobs: 1`): delete the `_target_:` line "
        "under `hydra.sweeper:` and keep the rest."
    )


def _unreadable_override() -> tuple[str, str] | None:
    """The first override of the command line that Hydra cannot parse on its own (a number too
    long to convert, a bracket left open), and why: Hydra's message names no key."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for argument in sys.argv[1:]:
        if argument.startswith("-") or "=" not in argument:
            continue
        try:
            parser.parse_overrides([argument])
        except Exception as error:
            message = " ".join(str(error).split())
            return argument, message if message.endswith(".") else message + "."
    return None


def describe_yaml_error(error: Exception, path: Path | str | None = None) -> str:
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    name = path or (mark.name if mark is not None else "a config file")
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{name} is not valid YAML: {problem}{where}. Fix the file, or remove it."


def _closest_keys(error: Exception) -> str:
    """For a key the config does not have (``data.batchsize=3``), the closest keys there (and
    the config groups, at the top: ``expriment=...``): Hydra's only advice, ``+key=``, adds one."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)) or cause.parent_node is None:
        return ""
    key = str(cause.key)
    parent = str(cause.full_key)[: -len(key)]  # "data." or ""
    if (hint := key_hint(str(cause.full_key), cause.parent_node)) is not None:
        return f" {hint}"
    names = [str(k) for k in cause.parent_node if not str(k).startswith("_")]
    names += [f.name for f in config_dir().iterdir() if f.is_dir()] if not parent else []
    close = [f"`{parent}{n}`" for n in difflib.get_close_matches(key, names)]
    return f" Did you mean {' or '.join(close)}?" if close else ""
