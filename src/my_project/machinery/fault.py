"""Whose fault an exception is: the team's bug, or a value of the run refused.

The rule is `run/boundary.py`'s (its docstring); here is how it reads a traceback, low in the
machinery so that every check that calls the team's code (`preflight/contract.py`) asks it.
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

from omegaconf import DictConfig

from .errors import causes

_HERE = Path(__file__).resolve()
_PACKAGE = str(_HERE.parents[1]) + os.sep  # the team's rooms (models/, data/), installed or not
_MACHINERY = (str(_HERE.parents[0]) + os.sep, str(_HERE.parents[2] / "hydra_plugins") + os.sep)
# The entry scripts beside the package (train.py, ...) are the template's too.
_SCRIPTS = {str(_HERE.parents[3] / f"{s}.py") for s in ("train", "eval", "predict", "serve")}
_SCRIPTS |= {str(_HERE.parents[3] / "export.py")}
# Installed libraries: anything in a site-packages (or Debian's dist-packages) folder, whichever
# environment it belongs to (a venv may layer over another's), and the standard library.
_LIBRARY_FOLDERS = {"site-packages", "dist-packages"}
_STDLIB = tuple(
    os.path.join(os.path.realpath(sysconfig.get_path(n)), "") for n in ("stdlib", "platstdlib")
)
_RAISE = dis.opmap["RAISE_VARARGS"]
_UNPACK = {dis.opmap[n] for n in ("UNPACK_SEQUENCE", "UNPACK_EX")}
# What Python says when a call's arguments do not fit the callee's parameters: a keyword it
# lacks, or too few or too many of them.
_ARITY = re.compile(r"missing \d+ required|takes \d+ positional|positional arguments? but")
_BINDING = re.compile(
    r"(?:unexpected keyword argument|multiple values for (?:keyword )?argument) '(\w+)'"
)


def teams_bug(
    error: BaseException,
    values: Iterable[Any] = (),
    keys: Iterable[str] = (),
    inputs_given: bool = False,
) -> BaseException | None:
    """The exception of ``error``'s chain that is the team's bug, or None when ``error`` is a
    value refused (the rule in `run/boundary.py`'s docstring). ``values``: of the run, besides
    those the team's outermost frame was handed; ``keys``: the config keys they came under;
    ``inputs_given``: the tensors that frame was handed (a batch of data the machinery feeds a
    ``forward``) count as values of the run too, by identity."""
    for exception in causes(error):
        frames = _frames(exception.__traceback__)
        team = [i for i, (frame, _) in enumerate(frames) if is_teams_file(frame.f_code.co_filename)]
        if not team:
            continue
        given: set[Any] = set(plain_values(values))
        handed = _arguments(frames[team[0]][0])
        given.update(plain_values(handed))
        if inputs_given:
            given.update(_Identity(v) for v in _objects(handed.values()))
        frame, lasti = frames[team[-1]]
        raised_here = team[-1] == len(frames) - 1
        explained = _explained(exception, frame, lasti, raised_here, given, set(keys))
        return None if explained else exception
    return None


class _Identity:
    """An object compared by identity (a tensor: ``==`` would compare its values)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value


def _objects(values: Iterable[Any], depth: int = 0) -> Iterator[Any]:
    """``values`` that are not plain, and what their lists, tuples and dicts hold."""
    for value in values:
        if _scalar(value) or value is None:
            continue
        yield value
        if depth < 2 and isinstance(value, Mapping):
            yield from _objects(list(value.values())[:100], depth + 1)
        elif depth < 2 and isinstance(value, (list, tuple)):
            yield from _objects(value[:100], depth + 1)


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
    if raised_here and isinstance(error, TypeError) and _ARITY.search(str(error)):
        # the call site's own arguments, unless they come as `**settings` of the run
        return "**" in _failed(code, lasti) and _holds(
            _named_values(frame, _failed(code, lasti)), given
        )
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
    found = list(candidates)
    if any(_Identity(value) in given for value in _objects(found)):
        return True
    for value in plain_values(found):
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
