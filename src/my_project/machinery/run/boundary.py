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
  callee lacks, when the keyword is a key of the config (a ``**kwargs`` passed on);
- anything else is a bug: an attribute or a name misspelt, ``first, last = (16, 32, 4)``, a
  literal index ``self.net[5]`` that torch refuses, a value computed by the team's code.

The values of the run are the plain values (numbers, strings, paths, and lists and dicts of
them) under the config node being built, and those the team's outermost frame was called with:
what Hydra, Lightning or the machinery handed the team's code. Only the expression that failed
is read (Python's own positions of it, as its tracebacks underline), so a value of the run
elsewhere on the line does not excuse a typo next to it.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import inspect
import linecache
import os
import re
import sysconfig
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import CodeType, FrameType, TracebackType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError, causes, user_error_in
from ..reliability.resume import override_key

_HERE = Path(__file__).resolve()
_PACKAGE = str(_HERE.parents[2]) + os.sep  # the team's rooms (models/, data/), installed or not
_MACHINERY = (str(_HERE.parents[1]) + os.sep, str(_HERE.parents[3] / "hydra_plugins") + os.sep)
# The entry scripts beside the package (train.py, ...) are the template's too.
_SCRIPTS = {str(_HERE.parents[4] / f"{s}.py") for s in ("train", "eval", "predict", "serve")}
_SCRIPTS |= {str(_HERE.parents[4] / "export.py")}
# Installed libraries: anything in a site-packages (or Debian's dist-packages) folder, whichever
# environment it belongs to (a venv may layer over another's), and the standard library.
_LIBRARY_FOLDERS = {"site-packages", "dist-packages"}
_STDLIB = tuple(
    os.path.join(os.path.realpath(sysconfig.get_path(n)), "") for n in ("stdlib", "platstdlib")
)
_RAISE = dis.opmap["RAISE_VARARGS"]
_UNPACK = {dis.opmap[n] for n in ("UNPACK_SEQUENCE", "UNPACK_EX")}
# What Python says when a call's arguments do not fit the callee's parameters.
_BINDING = re.compile(
    r"(?:unexpected keyword argument|multiple values for (?:keyword )?argument) '(\w+)'"
)


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


def teams_bug(
    error: BaseException, values: Iterable[Any] = (), keys: Iterable[str] = ()
) -> BaseException | None:
    """The exception of ``error``'s chain that is the team's bug, or None when ``error`` is a
    value refused (the module docstring's rule). ``values``: of the run, besides those the
    team's outermost frame was handed; ``keys``: the config keys they came under."""
    for exception in causes(error):
        frames = _frames(exception.__traceback__)
        team = [i for i, (frame, _) in enumerate(frames) if is_teams_file(frame.f_code.co_filename)]
        if not team:
            continue
        given = set(plain_values(values))
        given.update(plain_values(_arguments(frames[team[0]][0])))
        frame, lasti = frames[team[-1]]
        raised_here = team[-1] == len(frames) - 1
        explained = _explained(exception, frame, lasti, raised_here, given, set(keys))
        return None if explained else exception
    return None


def is_teams_file(filename: str) -> bool:
    """Whether ``filename`` (a code object's) is the team's code: not the machinery, not an
    installed library, not the standard library, not code made at run time (``<string>``)."""
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>, <stdin>
        return False
    path = os.path.realpath(filename)
    if path.startswith(_MACHINERY) or path in _SCRIPTS:
        return False
    if path.startswith(_PACKAGE):
        return True
    return not (_LIBRARY_FOLDERS & set(Path(path).parts) or path.startswith(_STDLIB))


def _frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    found = []
    while tb is not None:
        found.append((tb.tb_frame, tb.tb_lasti))
        tb = tb.tb_next
    return found


def _explained(
    error: BaseException,
    frame: FrameType,
    lasti: int,
    raised_here: bool,
    given: set[Any],
    keys: set[str],
) -> bool:
    """Whether a value of the run explains ``error``, as it left the team's ``frame``."""
    code = frame.f_code
    opcode = code.co_code[lasti] if 0 <= lasti < len(code.co_code) else None
    if raised_here and opcode == _RAISE:  # the team's own raise or assert
        if isinstance(error, NotImplementedError):
            return False
        in_play = [*_arguments(frame).values(), *_named_values(frame, _failed(code, lasti))]
        return _holds(in_play, given)
    if raised_here and isinstance(error, TypeError) and (match := _BINDING.search(str(error))):
        return match[1] in keys  # a keyword passed on from the config, or the team's typo
    text = _failed(code, lasti)
    if raised_here and opcode in _UNPACK:  # its positions are the targets: read the value
        text = _statement(code, lasti)
        with contextlib.suppress(SyntaxError):
            tree = ast.parse(text.strip())
            if tree.body and isinstance(tree.body[0], ast.Assign):
                text = ast.unparse(tree.body[0].value)
    return _holds(_named_values(frame, text), given)


def _positions(code: CodeType, lasti: int) -> tuple[int | None, ...]:
    """(first line, last line, first column, last column) of the instruction at ``lasti``."""
    positions = getattr(code, "co_positions", None)  # Python 3.11+; else the whole line
    if positions is not None:
        found = list(positions())
        if 0 <= lasti // 2 < len(found):
            return tuple(found[lasti // 2])
    line = next((n for start, n in dis.findlinestarts(code) if start <= lasti), None)
    return (line, line, None, None)


def _failed(code: CodeType, lasti: int) -> str:
    """The source text of the instruction that failed (what a traceback underlines)."""
    first, last, start, end = _positions(code, lasti)
    if first is None:
        return ""
    lines = [
        linecache.getline(code.co_filename, n).encode() for n in range(first, (last or first) + 1)
    ]
    if start is None or end is None:
        return b"".join(lines).decode(errors="replace")
    if len(lines) == 1:
        return lines[0][start:end].decode(errors="replace")
    return (lines[0][start:] + b"".join(lines[1:-1]) + lines[-1][:end]).decode(errors="replace")


def _statement(code: CodeType, lasti: int) -> str:
    first, last, _, _ = _positions(code, lasti)
    if first is None:
        return ""
    return "".join(
        linecache.getline(code.co_filename, n) for n in range(first, (last or first) + 1)
    )


def _arguments(frame: FrameType) -> dict[str, Any]:
    """The arguments ``frame``'s function was called with (as they are now), not ``self``."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    names = [n for n in code.co_varnames[:count] if n not in ("self", "cls")]
    return {n: frame.f_locals[n] for n in names if n in frame.f_locals}


def _named_values(frame: FrameType, text: str) -> list[Any]:
    """The values ``text`` (an expression of ``frame``) hands what it calls or indexes: a
    call's arguments and the path or string it is a method of, a subscript's key; an
    attribute looked up hands nothing (a missing one is a typo)."""
    try:
        tree: ast.AST = ast.parse(f"(\n{text}\n)", mode="eval").body
    except SyntaxError:
        try:
            tree = ast.parse(text.strip())
        except SyntaxError:
            return []
    if isinstance(tree, ast.Call):
        parts: list[ast.AST] = [*tree.args, *(k.value for k in tree.keywords)]
        receiver = tree.func.value if isinstance(tree.func, ast.Attribute) else None
        if receiver is not None and _scalar(value := _evaluate(frame, receiver)):
            return [*_evaluated(frame, parts), value]
    elif isinstance(tree, ast.Subscript):
        parts = [tree.slice]
    elif isinstance(tree, ast.Attribute):
        parts = []
    else:
        parts = [tree]
    return _evaluated(frame, parts)


_MISSING = object()


def _evaluated(frame: FrameType, nodes: Iterable[ast.AST]) -> list[Any]:
    """The values of the longest names (``self.hparams.hidden``, ``kwargs["hidden"]``) in
    ``nodes``, looked up in ``frame``'s locals; nothing is called but attribute lookups."""
    found = []
    for node in nodes:
        value = _evaluate(frame, node)
        if value is not _MISSING:
            found.append(value)
        elif not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant)):
            found += _evaluated(frame, ast.iter_child_nodes(node))
        elif isinstance(node, ast.Subscript):
            found += _evaluated(frame, [node.slice])
    return found


def _evaluate(frame: FrameType, node: ast.AST) -> Any:
    try:
        if isinstance(node, ast.Name):
            return frame.f_locals.get(node.id, _MISSING)
        if isinstance(node, ast.Starred):
            return _evaluate(frame, node.value)
        if isinstance(node, ast.Attribute):
            owner = _evaluate(frame, node.value)
            return _MISSING if owner is _MISSING else getattr(owner, node.attr)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            owner = _evaluate(frame, node.value)
            return _MISSING if owner is _MISSING else owner[node.slice.value]
    except Exception:  # an attribute that is not there, a property that raises
        return _MISSING
    return _MISSING


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str, os.PathLike)) and not isinstance(value, bool)


def plain_values(value: Any, depth: int = 0) -> Iterator[Any]:
    """The numbers and strings (paths as strings) in ``value`` and its lists and dicts."""
    if _scalar(value):
        yield os.fspath(value) if isinstance(value, os.PathLike) else value
    elif depth < 4 and isinstance(value, (Mapping, DictConfig)):
        for item in list(value.values())[:1000]:
            yield from plain_values(item, depth + 1)
    elif (
        depth < 4
        and isinstance(value, (Sequence, set, frozenset))
        and not isinstance(value, (str, bytes))
    ):
        for item in list(value)[:1000]:
            yield from plain_values(item, depth + 1)


def _holds(candidates: Iterable[Any], given: set[Any]) -> bool:
    """Whether a value among ``candidates`` is (or, for a path, lies in or above) one of the
    run's ``given`` values."""
    paths = [g for g in given if isinstance(g, str) and os.sep in g and len(g) > 2]
    for value in plain_values(list(candidates)):
        with contextlib.suppress(TypeError):
            if value in given:
                return True
        if (
            isinstance(value, str)
            and os.sep in value
            and any(value.startswith(p) or p.startswith(value) for p in paths)
        ):
            return True
    return False


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
        names = re.findall(r"'(\w+)'", missing[1])
        unset = [f"`{node}.{name}`" for name in names]
        target = by or _target_of(cfg, node)
        chosen = [shown for key, shown in typed_choices(cfg)]
        with_ = f" (with {', '.join(chosen)} from the command line)" if chosen else ""
        offer = " or from the data module's `model_kwargs()`" if node == "model" else ""
        return (
            f"{' and '.join(unset)} {'has' if len(unset) == 1 else 'have'} no value{with_}, and "
            f"{target or node} needs {'it' if len(unset) == 1 else 'them'}: {describe(error)} "
            f"Give {'it' if len(unset) == 1 else 'them'} on the command line "
            f"({unset[0].strip('`')}=...), in configs/{offer}."
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
