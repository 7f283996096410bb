"""Hydra's own errors, before a job runs, as one paragraph and exit status 2.

What Hydra refuses while it reads the command line, composes the config, makes the run
directory and its log file, or starts a launcher (an option or key that does not exist, a broken
YAML file, a malformed override, a place it cannot write) is bad input: one paragraph saying
what to type instead, not Hydra's traceback or terse message and exit status 1. Errors of a job
itself pass through to Hydra's own report (`entry.as_job` has said its bad input already).
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
from ..errors import UserError, report, user_error_in
from ..reliability import run_dir

HELP_HINT = "`python {script} --help` lists the config groups and their options."
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
    """What Hydra refused, in one paragraph that says what to do; None for an error raised
    elsewhere than in Hydra, OmegaConf or the file system (a bug of a plugin or a callback)."""
    import yaml
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    script = Path(sys.argv[0]).name
    found = user_error_in(error) or launcher_error(error)
    if found is not None:
        return found
    if isinstance(error, MissingConfigException) and error.missing_cfg_file:
        return UserError(_missing_option(error, script))
    chain = list(_chain(error))
    yaml_error = next((e for e in chain if isinstance(e, yaml.YAMLError)), None)
    if yaml_error is not None:
        return UserError(describe_yaml_error(yaml_error))
    unknown_key = _not_in_struct(error, script)
    if unknown_key is not None:
        return UserError(unknown_key)
    os_error = next((e for e in chain if isinstance(e, OSError) and e.filename), None)
    if os_error is not None:  # a run directory or log file in a place this user cannot write
        return UserError(
            f"Cannot write {os_error.filename}: {os_error.strerror}. Choose a place this user "
            "can write to, e.g. `paths.log_dir=logs` or `hydra.run.dir=logs/train/runs/mine`; to "
            "resume a run stored where it cannot be written, resume a copy of its directory."
        )
    message = " ".join(str(error).split("Config search path:")[0].split())
    cause = str(error.__cause__ or "").strip().splitlines()
    if cause and cause[0] not in message:
        message += f" ({cause[0].strip()})"
    if getattr(error, "override", None):  # Hydra's OverrideParseException
        message = f"`{error.override}`: {message}"  # type: ignore[attr-defined]
    if not isinstance(error, (HydraException, OmegaConfBaseException)):
        if not _frames(error)[-1].startswith(("hydra.", "omegaconf.")):
            return None
        message = f"The command line cannot be read: {type(error).__name__}: {message}"
    end = "" if message.endswith(".") else "."
    return UserError(f"{message}{end} {HELP_HINT.format(script=script)}")


def describe_yaml_error(error: Exception, path: Path | str | None = None) -> str:
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    name = path or (mark.name if mark is not None else "a config file")
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{name} is not valid YAML: {problem}{where}. Fix the file, or remove it."


def launcher_error(error: Exception) -> UserError | None:
    """A launcher plugin that cannot start the jobs (``-m hydra/launcher=slurm`` where there is
    no SLURM: submitit's ``Could not detect "srun"``); None when no launcher plugin raised it."""
    if not any(name.startswith("hydra_plugins.") and "launcher" in name for name in _frames(error)):
        return None
    typed = next(
        (f"`{a}`" for a in sys.argv[1:] if a.lstrip("+").startswith("hydra/launcher=")),
        "The launcher",
    )
    return UserError(
        f"{typed} cannot start the jobs: {' '.join(f'{type(error).__name__}: {error}'.split())} "
        "Run the command where that launcher works (e.g. a SLURM cluster's login node for "
        "`hydra/launcher=slurm`), or leave `hydra/launcher=...` out to run the jobs here."
    )


def _not_in_struct(error: Exception, script: str) -> str | None:
    """An override of a key the config does not have (``trainer.max_epoch=3``): the closest
    keys there, and for the trainer its arguments. Hydra's advice, ``+key=...``, adds the key,
    which for a typo is never what was meant."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        return None
    if "not in struct" not in str(cause) or getattr(cause, "parent_node", None) is None:
        return None
    full_key, key = str(cause.full_key), str(cause.key)
    parent = full_key[: -len(key) - 1] if full_key.endswith("." + key) else ""
    names = [str(k) for k in cause.parent_node if not str(k).startswith("_")]
    if not parent:  # a misspelt config group (`expriment=...`) too
        names += [folder.name for folder in config_dir().iterdir() if folder.is_dir()]
    where = f"under `{parent}`" if parent else "at the top"
    added = f" To add a new key, write `+{full_key}=...`."
    if parent == "trainer":
        from .trainer_arguments import trainer_parameters

        names = sorted(set(names) | trainer_parameters())
        where, added = "under `trainer`, and `lightning.Trainer` takes no such argument", ""
    close = [
        f"`{parent}.{n}`" if parent else f"`{n}`" for n in difflib.get_close_matches(key, names)
    ]
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
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
    # As typed (the last of its group): `logger=[csv,wandbb]` names the whole list.
    typed = [a.lstrip("+~") for a in sys.argv[1:] if a.lstrip("+~").startswith(f"{group}=")]
    typed_as = typed[-1] if typed and name in typed[-1] else f"{group}={name}"
    suggested = (
        re.sub(rf"(?<=[=\[,]){re.escape(name)}(?=[\],]|$)", close[0], typed_as) if close else ""
    )
    hint = f" Did you mean `{suggested}`?" if suggested else ""
    return (
        f"`{typed_as}`: the config group `{group}` has no option `{name}` (no file "
        f"configs/{group}/{name}.yaml).{hint} Its options: {', '.join(options) or 'none'}. "
        f"{HELP_HINT.format(script=script)}"
    )


def group_options(group: str) -> list[str]:
    """The options of a config group, wherever Hydra finds them (its search path); the
    project's configs/ folder when Hydra is not running."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return list(GlobalHydra.instance().config_loader().get_group_options(group))
    folder = config_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def _frames(error: BaseException) -> list[str]:
    """The modules of the frames ``error`` passed through, innermost last."""
    names, traceback = [""], error.__traceback__
    while traceback is not None:
        names.append(str(traceback.tb_frame.f_globals.get("__name__", "")))
        traceback = traceback.tb_next
    return names


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
