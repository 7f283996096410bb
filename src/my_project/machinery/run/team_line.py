"""The line of the team's code an error raised inside a library comes from, for a message that
names it instead of the library's own line: torch's exporter runs ``forward`` in Python (its
frames are in the error's tracebacks), and records each operation's line in the program it
exports (for an operation the ONNX exporter then cannot translate)."""

from __future__ import annotations

import inspect
import linecache
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import causes

_MACHINERY = Path(__file__).resolve().parents[1]
_LIBRARIES = {"site-packages", "dist-packages"}


def team_line(model: Any, error: BaseException, program: Callable[[], Any]) -> str:
    """``at FILE:LINE in FUNCTION, `code` (Module.forward): ``: the innermost line of the
    team's code in the tracebacks of ``error`` and its causes, with the submodule it calls
    there; else the line that made the operation the error names, recorded in ``program()``
    (an exported program, or None); else ``""``."""
    import torch

    files = team_files(model)
    found: tuple[str, int, str, str] | None = None
    for each in causes(error):
        frames = []
        tb = each.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        for index, (frame, line) in enumerate(frames):
            if os.path.realpath(frame.f_code.co_filename) not in files:
                continue
            called = ""
            for callee, _ in frames[index + 1 :]:
                owner = callee.f_locals.get("self")
                if callee.f_code.co_name == "forward" and isinstance(owner, torch.nn.Module):
                    called = f" ({type(owner).__name__}.forward)"
                    break
            found = (frame.f_code.co_filename, line, frame.f_code.co_name, called)
    if found is None:
        built = program()
        found = recorded_line(files, error, built) if built is not None else None
    if found is None:
        return ""
    file, line, function, called = found
    text = linecache.getline(file, line).strip()
    return f"at {_shown_path(file)}:{line} in {function}, `{text}`{called}: "


def recorded_line(files: set[str], error: BaseException, program: Any) -> Any:
    """The team's line recorded (``stack_trace``) for the node of ``program`` whose operation
    the error's messages name: ``prims.zeta`` for ``aten.special_zeta``."""
    text = " ".join(str(each) for each in causes(error))
    found = re.findall(r"op='\w+\.(\w+)'|torch\.ops\.\w+\.(\w+)\.", text)
    ops = {name for pair in found for name in pair if name}
    for node in program.graph.nodes:
        if node.op != "call_function" or not any(op in str(node.target) for op in ops):
            continue
        trace = str(node.meta.get("stack_trace") or "")
        lines = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', trace)
        mine = [(f, int(n), fn, "") for f, n, fn in lines if os.path.realpath(f) in files]
        if mine:
            return mine[-1]
    return None


def team_files(model: Any) -> set[str]:
    """The source files of the module's classes and its submodules' that are the team's: not
    an installed library's, nor the machinery's."""
    files = set()
    for cls in {*type(model).__mro__, *(type(m) for m in model.modules())}:
        try:
            file = inspect.getsourcefile(cls)
        except TypeError:  # a built-in class
            continue
        real = Path(os.path.realpath(file)) if file else None
        if real and not (_LIBRARIES & set(real.parts) or real.is_relative_to(_MACHINERY)):
            files.add(str(real))
    return files


def _shown_path(file: str) -> str:
    """``file`` relative to the working directory where it is inside it."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd()))
    except ValueError:
        return file
