"""Fixtures for the template's own tests (not copied into generated projects)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
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
    """No PYTHONPATH (it points at this checkout's package), no wandb credentials."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("WANDB_")}
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


def snapshot_repo(dest: Path, edit: Callable[[Path], None] | None = None) -> Path:
    """A git repository holding what this checkout would commit (tracked and untracked files,
    not ignored ones), committed: the template as users clone it."""
    listing = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listing.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    if edit:
        edit(dest)
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
