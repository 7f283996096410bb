"""The template used the way users fetch it: a git URL for cookiecutter, and cruft create/update."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import git, run_cookiecutter_cli, snapshot_repo, subprocess_env
from .expected import DEFAULTS

ACME = {
    **DEFAULTS,
    "project_name": "Acme Vision",
    "project_slug": "acme-vision",
    "package_name": "acme_vision",
}


@pytest.fixture(scope="module")
def bare_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template as a remote: a bare clone of a repository holding this checkout's files."""
    base = tmp_path_factory.mktemp("remote")
    work = snapshot_repo(base / "work")
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(base / "template.git")], check=True
    )
    return base / "template.git"


def project_files(project: Path) -> dict[str, bytes]:
    return {
        p.relative_to(project).as_posix(): p.read_bytes()
        for p in project.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }


def rendered(gen: ModuleType, template: object, project: Path, **answers: object) -> dict:
    year = re.search(r"Copyright \(c\) (\d{4})", (project / "LICENSE").read_text()).group(1)
    files = gen.render(template, {**ACME, **answers, "__year": year})
    return {path: entry.data for path, entry in files.items()}


def test_cookiecutter_from_a_git_url_makes_the_same_project(
    gen: ModuleType, template: object, bare_repo: Path, tmp_path: Path, cc_config: Path
) -> None:
    start = time.perf_counter()
    result = run_cookiecutter_cli(
        f"file://{bare_repo}", tmp_path / "OUT", cc_config, "project_name=Acme Vision"
    )
    print(f"cookiecutter from file:// git URL: {time.perf_counter() - start:.2f} s")
    assert result.returncode == 0, result.stderr[-3000:]
    project = tmp_path / "OUT" / "acme-vision"
    assert project_files(project) == rendered(gen, template, project)
    assert (project / ".ci" / "run").stat().st_mode & 0o111  # git kept it executable


def test_cruft_create_then_update_brings_template_changes_renamed(
    gen: ModuleType, template: object, tmp_path: Path
) -> None:
    def add_module(repo: Path) -> None:
        (repo / "src" / "my_project" / "extra.py").write_text('NAME = "my_project"\n')

    repo = snapshot_repo(tmp_path / "template")
    out = tmp_path / "OUT"
    out.mkdir()
    cruft = [sys.executable, "-m", "cruft"]
    env = subprocess_env()
    created = subprocess.run(
        [
            *(*cruft, "create", str(repo), "--no-input", "--output-dir", str(out)),
            *("--extra-context", json.dumps({"project_name": "Acme Vision", "logger": "csv"})),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    project = out / "acme-vision"
    files = project_files(project)
    state = json.loads(files.pop(".cruft.json"))
    assert state["context"]["cookiecutter"]["package_name"] == "acme_vision"
    assert files == rendered(gen, template, project, logger="csv")

    # The template moves on; the project follows with `cruft update`, renamed and configured.
    add_module(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "extra module")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "generated")
    updated = subprocess.run(
        [*cruft, "update", "--skip-apply-ask", "--project-dir", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert updated.returncode == 0, updated.stderr[-3000:]
    assert (project / "src" / "acme_vision" / "extra.py").read_text() == 'NAME = "acme_vision"\n'
    assert "  - logger: csv" in (project / "configs" / "train.yaml").read_text()
    assert (
        json.loads((project / ".cruft.json").read_text())["commit"]
        == git(repo, "rev-parse", "HEAD").strip()
    )
