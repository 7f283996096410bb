"""The error boundary: whose fault an exception is, told by what happened.

Whatever fails while a run builds its objects, imports the team's module, loads a checkpoint
into it or asks its data module for a split is one of two things:

- **a value refused**: a value the run was given (the config, the command line, a checkpoint's
  hyperparameters) that an object refuses. One paragraph naming the key (:func:`refusal`),
  exit status 2;
- **the team's bug**: its own traceback, down to the team's file and line, exit status 1.

The rule (:func:`teams_bug`). The team's code is every Python file that is not the machinery,
an installed library (a ``site-packages`` folder) or the standard library: the package's
``models/`` and ``data/``, a folder on ``PYTHONPATH``, a module found beside the configs a
``hydra.searchpath`` adds, a test file. Hydra and Lightning wrap what they call, so each
exception of the chain (``raise ... from``) is looked at, outermost first, and the first one
whose traceback passes through the team's code decides. None does: the machinery handed a
library what the config says (``Trainer(...)``, ``seed_everything``, a callback or scheduler
of a library ``_target_``), and the library refused it. One does: it is the team's bug unless
a value of the run explains it, judged at the team's innermost frame (where the exception left,
or was raised in, the team's code):

- the team's own ``raise`` or ``assert`` in a function whose arguments hold a value of the run
  is a check of its own (``raise ValueError("hidden must be > 0")``): refused. Not a
  ``NotImplementedError``, which marks code not written yet;
- a call that failed with what it was handed is refused when one of its arguments, or the path
  or string it is a method of, holds a value of the run (``nn.Linear(n, hidden)`` raising inside
  torch for ``hidden=-5``, ``getattr(nn, activation)``, ``root.mkdir()`` under a file); a
  subscript is refused when its key does (``table[activation]``); a call with a keyword the
  callee lacks, when the keyword is a key of the config (a ``**kwargs`` passed on), and one
  with too few or too many arguments, when they come as ``**settings`` holding the run's;
- anything else is a bug: an attribute or a name misspelt, ``first, last = (16, 32, 4)``, a
  literal index ``self.net[5]`` that torch refuses, a size the team's code makes from nothing
  the run gave (``nn.Linear(4, len(layers) - 1)``).

A value of the run among a failing call's arguments (``nn.Linear(hidden * 2, ...)`` too) is
taken as what the call refused: the paragraph then names the object and its complaint.

The values of the run are the plain values (numbers, strings, paths, and lists and dicts of
them) under the config node being built, and those the team's outermost frame was called with:
what Hydra, Lightning or the machinery handed the team's code. Only the expression that failed
is read (Python's own positions of it, as its tracebacks underline), so a value of the run
elsewhere on the line does not excuse a typo next to it. The same rule (`fault.py`) answers
for the team's module as it is imported (`preflight/contract.py`), for a checkpoint loaded into
it, and before a job (a Hydra callback or resolver of the team's: `hydra_errors.py`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError, user_error_in
from ..fault import plain_values, teams_bug
from ..reliability.resume import override_key

__all__ = ["built_from", "describe", "refusal", "teams_bug"]


@contextlib.contextmanager
def built_from(cfg: DictConfig, node: str, by: str | None = None) -> Iterator[None]:
    """Build what ``cfg.<node>`` configures inside; ``by``: who refuses, if not its ``_target_``.
    A value refused becomes a :class:`UserError`; the team's bug goes on with its traceback."""
    try:
        yield
    except UserError:
        raise
    except Exception as error:
        if (user_error := user_error_in(error)) is not None:
            raise user_error from None  # a check's own paragraph, however Hydra wrapped it
        bug = teams_bug(error, run_values(cfg, node), run_keys(cfg, node))
        if bug is not None:
            raise bug from None  # its own traceback, down to the team's line
        inner = _innermost_refusal(error)
        raise UserError(refusal(cfg, node, inner, by), every_rank=True) from inner


def _innermost_refusal(error: BaseException) -> BaseException:
    """What Hydra's `instantiate` wrapped, at every level: the object's own complaint."""
    from hydra.errors import InstantiationException

    inner = error
    while isinstance(inner, InstantiationException) and inner.__cause__ is not None:
        inner = inner.__cause__
    return inner


def run_values(cfg: DictConfig, node: str) -> list[Any]:
    """The plain values under ``cfg.<node>``, resolved where they resolve."""
    try:
        found = OmegaConf.select(cfg, node, default=None)
        return list(plain_values(OmegaConf.to_container(found, resolve=True)))
    except Exception:  # not a container (a top-level value), or one that does not resolve
        with contextlib.suppress(Exception):
            return list(plain_values([OmegaConf.select(cfg, node, default=None)]))
    return []


def run_keys(cfg: DictConfig, node: str) -> set[str]:
    """Every key name under ``cfg.<node>``."""
    found = OmegaConf.select(cfg, node, default=None)
    keys: set[str] = set()
    stack = [found] if OmegaConf.is_config(found) else []
    while stack:
        current = stack.pop()
        items = current.items_ex(resolve=False) if isinstance(current, DictConfig) else []
        for key, value in items:
            keys.add(str(key))
            if OmegaConf.is_config(value):
                stack.append(value)
    return keys


def refusal(cfg: DictConfig, node: str, error: BaseException, by: str | None = None) -> str:
    """The paragraph for ``error``, raised while building from ``cfg.<node>``."""
    missing = re.search(
        r"missing \d+ required (?:positional |keyword-only )?arguments?: (.+)", str(error)
    )
    typed = typed_under(cfg, node)
    if missing and isinstance(error, TypeError):
        names = [f"`{node}.{name}`" for name in re.findall(r"'(\w+)'", missing[1])]
        needs = f"{by or _target_of(cfg, node) or node} needs {'it' if len(names) == 1 else 'them'}"
        data = [shown for key, shown in typed_choices(cfg) if key == "data"]
        given = f", nor the data module's `model_kwargs()` ({data[0]})" if data else ""
        given = given if node == "model" else ""
        return (
            f"{' and '.join(names)} {'has' if len(names) == 1 else 'have'} no value: {needs} "
            f"({describe(error)[:-1]}), and neither its config{given} gives "
            f"{'it' if len(names) == 1 else 'them'}. Set {names[0][:-1]}=...` on the command line or in "
            "configs/, or pick configs that go together."
        )
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


def typed_choices(cfg: DictConfig) -> list[tuple[str, str]]:
    """(key, as shown) of the config groups chosen on the command line (``data=diabetes``)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    found = []
    for override in HydraConfig.get().overrides.task:
        key = override_key(override)
        if "=" in override and "." not in key and OmegaConf.is_config(cfg.get(key.split("/")[0])):
            found.append((key, f"`{override.lstrip('+')}`"))
    return found


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
