"""Developer tooling: pre-commit hooks that need no network; the README's layout map."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .helpers import ROOT

BIN = Path(sys.executable).parent


def test_pre_commit_config_is_valid_and_its_tools_are_installed(tmp_path: Path) -> None:
    pre_commit = shutil.which("pre-commit", path=str(BIN)) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (it is in the dev extra)")
    result = subprocess.run(
        [pre_commit, "validate-config", str(ROOT / ".pre-commit-config.yaml")],
        capture_output=True,
        text=True,
        env={"PATH": str(BIN), "PRE_COMMIT_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    # Local hooks run the project's .venv tools: same versions as CI, nothing to download.
    assert {repo["repo"] for repo in config["repos"]} == {"local"}
    assert {"ruff-check", "ruff-format", "mypy", "trailing-whitespace"} <= {h["id"] for h in hooks}
    for hook in hooks:
        tool = Path(shlex.split(hook["entry"])[0])
        assert tool.parent == Path(".venv/bin"), f"{hook['id']}: {tool} is not the .venv's"
        assert (BIN / tool.name).is_file(), f"{tool.name} ({hook['id']}) is not installed"


@pytest.mark.slow
def test_a_commit_runs_the_hooks_with_the_venv_tools_while_the_venv_is_not_activated(
    tmp_path: Path,
) -> None:
    """`make hooks`, then `git commit` from a shell whose PATH lacks the .venv: every hook
    runs its tool (the first commit is stopped by the whitespace the hook trims, the second
    passes ruff and mypy), none is "not found". git shows the hooks' lines on stderr."""
    repo = tmp_path / "project"
    (repo / "src" / "pkg").mkdir(parents=True)
    for name in (".pre-commit-config.yaml", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    (repo / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (repo / "src" / "pkg" / "__init__.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n"
    )
    (repo / "notes.txt").write_text("a line with trailing spaces   \n")
    path = ":".join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if p != str(BIN))
    git = shutil.which("git", path=path)
    if git is None:
        pytest.skip("git is not installed outside the virtual environment")
    env = {"PATH": path, "HOME": str(tmp_path), "PRE_COMMIT_HOME": str(tmp_path / "cache")}
    env.update(
        {
            f"GIT_{who}_{what}": "Test"
            for who in ("AUTHOR", "COMMITTER")
            for what in ("NAME", "EMAIL")
        }
    )

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)

    assert run(git, "init", "-q").returncode == 0
    installed = run(".venv/bin/python", "-m", "pre_commit", "install")  # what `make hooks` runs
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert run(git, "add", "-A").returncode == 0
    first = run(git, "commit", "-q", "-m", "first")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "not found" not in first.stdout + first.stderr
    assert re.search(r"trim trailing whitespace\.+Failed", first.stderr), first.stderr
    assert (repo / "notes.txt").read_text() == "a line with trailing spaces\n"  # trimmed
    assert run(git, "add", "-A").returncode == 0
    second = run(git, "commit", "-q", "-m", "second")
    assert second.returncode == 0, second.stdout + second.stderr
    for hook in ("ruff check", "ruff format", "mypy", "no breakpoint"):
        assert re.search(rf"{hook}.*\.+Passed", second.stderr), second.stderr


def test_every_path_the_readme_layout_names_exists() -> None:
    """The map at the top of the README's Layout section matches the tree."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[
        readme.index("## Layout\n") : readme.index("\n## ", readme.index("## Layout\n"))
    ]
    blocks = layout.split("```")[1::2]
    paths = [line.split()[0] for block in blocks for line in block.strip().splitlines()]
    assert len(paths) >= 20
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert missing == [], missing
