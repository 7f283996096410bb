"""Entry points as processes of their own, started without paying for the imports each time.

A `python train.py ...` spends about 4 s importing torch, Lightning and Hydra before the first
line of the run, and the tests start some hundred of them. Here the standard library's
forkserver (a "zygote": `multiprocessing`'s `forkserver` start method) imports those modules
once per test process and forks a child for each run. The child is a real process (its own pid,
exit status, signals, stdout and stderr, environment, working directory, `sys.path` and
`sys.argv`) and runs the script as `python <script> <args>` would, as `__main__`: only the
imports are shared. The forkserver itself never runs torch: a fork after torch's OpenMP threads
have started would hang the child, which is why the test process cannot simply fork itself.

What a library reads once at import (`OMP_NUM_THREADS`, matplotlib's config directory) comes
from the test process, not from the run's `env`; the tests vary neither. Processes a run
starts itself (DDP's other ranks) are plain `python` processes. `FRESH_PROCESSES=1` starts
every run with a plain `python` instead; `test_processes.py` checks that both give the same run.
"""

from __future__ import annotations

import atexit
import functools
import io
import json
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

# What every entry point imports before its first line of work (a module the forkserver
# cannot import is skipped, as multiprocessing does).
PRELOAD = ["torch", "lightning.pytorch", "torchmetrics", "hydra", "omegaconf", "matplotlib", "rich"]


def fresh_processes() -> bool:
    return os.environ.get("FRESH_PROCESSES") == "1"


@functools.cache
def _context() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    package = Path(__file__).resolve().parents[2].joinpath("src")
    names = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    context.set_forkserver_preload([*PRELOAD, *names, __name__])
    return context


@functools.cache
def _interpreter_path() -> list[str]:
    """`sys.path` of a plain `python script.py`, after the script's folder (and PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import json, sys; print(json.dumps(sys.path[1:]))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    return json.loads(out.stdout)


class ScriptProcess:
    """A started script, with the parts of `subprocess.Popen` the tests use."""

    def __init__(
        self,
        args: Sequence[str | os.PathLike[str]],
        cwd: str | os.PathLike[str],
        env: Mapping[str, str],
        new_session: bool = False,
        merge_stderr: bool = False,
    ) -> None:
        self.args = [str(a) for a in args]
        assert self.args[0] == sys.executable, "only `python <script> ...` or `python -m` runs warm"
        self._files = tempfile.TemporaryDirectory(prefix="entry-")
        self._out = Path(self._files.name) / "stdout"
        self._err = self._out if merge_stderr else Path(self._files.name) / "stderr"
        self.returncode: int | None = None
        self._process = _context().Process(
            target=_run_script,
            args=(self.args[1], self.args[2:], str(cwd), dict(env), str(self._out), str(self._err)),
            kwargs={"new_session": new_session, "path": _interpreter_path()},
        )
        self._process.start()
        self.pid = self._process.pid

    def poll(self) -> int | None:
        if self.returncode is None and not self._process.is_alive():
            self._process.join()
            self.returncode = self._process.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def output(self) -> tuple[str, str]:
        read = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
        return read(self._out), "" if self._err == self._out else read(self._err)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.output()


Started = ScriptProcess | subprocess.Popen  # what `start` returns


def start(
    args: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    new_session: bool = False,
    merge_stderr: bool = False,
) -> Started:
    """`python <script> <args>` started (warm, or plain under FRESH_PROCESSES=1); its stdout
    and stderr (merged when asked) come back from `communicate`."""
    if fresh_processes():
        return subprocess.Popen(
            [str(a) for a in args],
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
    return ScriptProcess(args, cwd, env, new_session=new_session, merge_stderr=merge_stderr)


def run(
    args: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(args, capture_output=True, text=True, ...)` for `python <script> ...`."""
    process = start(args, cwd, env, new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the run and whatever it started
        process.wait()
        raise
    assert process.returncode is not None
    return subprocess.CompletedProcess([str(a) for a in args], process.returncode, stdout, stderr)


def _run_script(
    script: str,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    out: str,
    err: str,
    new_session: bool,
    path: list[str],
) -> None:
    """In the forked child: become `python <script> <argv>` (or `python -m <module> <argv>`) in
    `cwd` with `env`, run it as `__main__`, and exit as Python would (threads joined, atexit
    handlers run, streams flushed, the exit status)."""
    if new_session:
        os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    module = argv.pop(0) if script == "-m" else None
    first = os.getcwd() if module else str(Path(script).resolve().parent)
    sys.path[:] = [first, *pythonpath, *path]
    sys.argv[:] = [script if module is None else module, *argv]
    stdout = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    stderr = stdout if err == out else os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    sys.stdout = sys.__stdout__ = _text_stream(1)
    sys.stderr = sys.__stderr__ = _text_stream(2)
    sys.stdin = sys.__stdin__ = open(os.devnull)  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.default_int_handler)
    warnings._filters_mutated()  # type: ignore[attr-defined]  # "once" warnings shown anew
    code: int = 0
    interrupted = False
    try:
        if module is None:
            runpy.run_path(script, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException as error:
        sys.excepthook(type(error), error, error.__traceback__)
        interrupted, code = isinstance(error, KeyboardInterrupt), 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter's exit: join threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if interrupted:  # Python ends on an uncaught Ctrl-C by SIGINT, as shells expect
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _text_stream(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding="utf-8", line_buffering=True, write_through=True
    )
