"""Developer tooling: pre-commit hooks that need no network; the README's layout map."""

from __future__ import annotations

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
    # Local hooks run this environment's tools: same versions as CI, nothing to download.
    assert {repo["repo"] for repo in config["repos"]} == {"local"}
    assert {"ruff-check", "ruff-format", "mypy", "trailing-whitespace"} <= {h["id"] for h in hooks}
    for hook in hooks:
        tool = shlex.split(hook["entry"])[0]
        assert (BIN / tool).is_file() or shutil.which(tool), f"{tool} ({hook['id']}) is missing"


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
