"""Fixtures for the template's own tests (not copied into generated projects)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_hook_module(name: str) -> ModuleType:
    """A module of hooks/ (not a package: cookiecutter runs the hooks as scripts)."""
    spec = importlib.util.spec_from_file_location(f"template_{name}", ROOT / "hooks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def gen() -> ModuleType:
    return load_hook_module("project_generator")


@pytest.fixture(scope="session")
def template(gen: ModuleType):
    return gen.read_template(ROOT)


@pytest.fixture
def cc_config(tmp_path: Path) -> Path:
    """A cookiecutter config that keeps its clones and replays out of the home directory."""
    config = tmp_path / "cookiecutter-config.yaml"
    config.write_text(
        f"cookiecutters_dir: {tmp_path / 'cookiecutters'}\nreplay_dir: {tmp_path / 'replay'}\n"
    )
    return config


def subprocess_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH (it points at this checkout's package), no wandb credentials, nothing of
    an outer `make` (`make test` passes its variables to every `make` below it)."""
    outer_make = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "ARGS", "VENV", "WORKERS")
    outer_make += ("TORCH", "TORCH_BUILD", "TORCH_INDEX", "PYTHON3", "FLOORS")
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith("WANDB_") and k not in outer_make
    }
    env.update(extra)
    return env


def run_cookiecutter_cli(
    template: str, out: Path, config: Path, *answers: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "cookiecutter", "--no-input", "--config-file", str(config)),
            *(template, "-o", str(out), *answers),
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=subprocess_env(),
        timeout=120,
    )


def snapshot_repo(dest: Path, edit: Callable[[Path], None] | None = None, subdir: str = "") -> Path:
    """A git repository holding what this checkout would commit (tracked and untracked files,
    not ignored ones), committed: the template as users clone it. `subdir`: the template in
    that folder of the repository (`cookiecutter --directory`)."""
    listing = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listing.split("\0")):
        if (ROOT / rel).is_file():
            (dest / subdir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / subdir / rel)
    if edit:
        edit(dest / subdir)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "template")
    return dest


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


# Python without /proc, as on macOS and Windows: every path under /proc is missing.
_NO_PROC = """import builtins, io, os


def _guard(call):
    def guarded(*args, **kwargs):
        path = args[0] if args else kwargs.get("path", kwargs.get("file", ""))
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith("/proc"):
            raise FileNotFoundError(2, "no /proc on this system", os.fsdecode(path))
        return call(*args, **kwargs)

    return guarded


for name in ("readlink", "stat", "lstat", "listdir", "scandir", "open"):
    setattr(os, name, _guard(getattr(os, name)))
io.open = builtins.open = _guard(io.open)
"""


def without_proc_or_pwd(tmp: Path) -> dict[str, str]:
    """The environment of a run where Python (cookiecutter, cruft, and the hooks they start)
    sees no /proc and the shell left no PWD."""
    site = tmp / "no-proc-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_NO_PROC)
    env = subprocess_env(PYTHONPATH=str(site))
    env.pop("PWD", None)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, pathlib; pathlib.Path('/proc/self/cwd').resolve(strict=True)",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "no /proc" in probe.stderr, "the simulation leaks /proc"
    return env


def layered_venv(path: Path) -> Path:
    """A virtual environment that sees the current one's packages (torch is not installed
    again), so projects install there without touching the current environment."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parents = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "_parent_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    )
    return python


def make_in(project: Path, *args: str, venv: Path | None = None, timeout: float = 900):
    """`make <args>` in a generated project, with a virtual environment layered on this one as
    its installed `.venv` (the project's own install is what the fresh-clone tests check)."""
    if venv is None:
        venv = project.parent / f"{project.name}-venv"
    if not (venv / "bin" / "python").exists():
        layered_venv(venv)
    (venv / ".installed").touch()  # newer than the project's lock and pyproject.toml
    return subprocess.run(
        ["make", *args, f"VENV={venv}"],
        cwd=project,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=timeout,
    )
