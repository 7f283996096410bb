"""The error boundary of a build: a value the config gives that is refused, or the team's bug.

Every object of a run is built from a node of its config inside :func:`built_from`, before
anything is written. A :class:`UserError`, a ``ValueError``, or any exception whose innermost
frame is in an installed library or the machinery is the value refused: one paragraph naming the
node, the overrides typed under it and the object's complaint (exit status 2). Any other
exception, raised in the team's own code, is a bug: its traceback, down to the team's line.
"""

from __future__ import annotations

import contextlib
import os
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError
from ..reliability.resume import override_key

_HERE = Path(__file__).resolve()
_MACHINERY = (str(_HERE.parents[1]) + os.sep, str(_HERE.parents[3] / "hydra_plugins") + os.sep)
_PACKAGE = str(_HERE.parents[2]) + os.sep  # the team's rooms (models/, data/), installed or not
# Installed libraries: anything in a site-packages (or Debian's dist-packages) folder, whichever
# environment it belongs to (a venv may layer over another's), and the standard library.
_LIBRARY_FOLDERS = {"site-packages", "dist-packages"}
_STDLIB = tuple(
    os.path.join(os.path.realpath(sysconfig.get_path(n)), "") for n in ("stdlib", "platstdlib")
)


@contextlib.contextmanager
def built_from(cfg: DictConfig, node: str, by: str | None = None) -> Iterator[None]:
    """Build what ``cfg.<node>`` configures inside; ``by``: who refuses, if not its ``_target_``."""
    from hydra.errors import InstantiationException

    try:
        yield
    except UserError:
        raise
    except Exception as error:
        inner: BaseException = error
        while isinstance(inner, InstantiationException) and inner.__cause__ is not None:
            inner = inner.__cause__  # what Hydra's `instantiate` wrapped, at every level
        if isinstance(inner, UserError):
            raise inner from None
        if isinstance(inner, ValueError) or not raised_in_teams_code(inner):
            raise UserError(refusal(cfg, node, inner, by), every_rank=True) from inner
        raise inner from None  # its own traceback, down to the team's line


def raised_in_teams_code(error: BaseException) -> bool:
    """Whether the innermost frame of ``error`` is in the team's code."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename if tb is not None else "<unknown>"
    path = os.path.realpath(filename)
    if filename.startswith("<") or path.startswith(_MACHINERY):  # <frozen importlib...>, <string>
        return False
    if path.startswith(_PACKAGE):
        return True
    return not (_LIBRARY_FOLDERS & set(Path(path).parts) or path.startswith(_STDLIB))


def refusal(cfg: DictConfig, node: str, error: BaseException, by: str | None = None) -> str:
    """The paragraph for ``error``, raised while building from ``cfg.<node>``."""
    typed = typed_under(cfg, node)
    key = typed[0][0] if len(typed) == 1 else node
    target = None if key.endswith("._target_") else by or _target_of(cfg, key)
    listed = ", ".join(shown for _, shown in typed)
    subject = f"`{node}`, with {listed} from the command line" if len(typed) > 1 else listed
    refused = f"{subject or f'`{node}`'} was refused" + (f" by {target}" if target else "")
    return f"{refused}: {describe(error)} Fix it on the command line or in configs/."


def describe(error: BaseException) -> str:
    """``Type: message.`` on one line, at most about 400 characters: a library's complaint."""
    message = " ".join(str(error).split())
    message = message if len(message) < 400 else message[:397] + "..."
    complaint = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return complaint if complaint.endswith((".", "?", "!")) else complaint + "."


def typed_under(cfg: DictConfig, node: str) -> list[tuple[str, str]]:
    """(key, as shown) of the overrides typed under ``node`` (``+trainer.foo=1``), else for a key
    a value under it takes (``monitor_mode=maximum``, in ``${monitor_mode}``), else the choice
    of ``node`` itself (``model=...``)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    found = OmegaConf.select(cfg, node, default=None)
    text = OmegaConf.to_yaml(found) if OmegaConf.is_config(found) else ""  # `${...}` kept
    inside, choices, referenced = [], [], []
    for override in HydraConfig.get().overrides.task:
        key, shown = override_key(override).replace("/", "."), f"`{override.lstrip('+')}`"
        if key.startswith(node + ".") or (key == node and "." in node):
            inside.append((key, shown))
        elif key == node:  # `model=classifier`: the choice of the config, not a value in it
            choices.append((key, shown))
        elif "${" + key + "}" in text:
            referenced.append((node, f"{shown} (in {node})"))
    return inside or referenced or choices


def _target_of(cfg: DictConfig, key: str) -> str | None:
    """The ``_target_`` of the innermost config above (or at) ``key`` that has one."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if isinstance(found, DictConfig) and isinstance(found.get("_target_"), str):
            return str(found._target_)
    return None
