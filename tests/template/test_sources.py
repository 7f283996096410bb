"""The template however users fetch it (a relative path, a git URL, a zip, a folder of a
repository, cruft), on a system without /proc or PWD; and `make update` after the template
moved on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import git, make_in, snapshot_repo, subprocess_env, without_proc_or_pwd
from .expected import DEFAULTS

ACME = {
    **DEFAULTS,
    "project_name": "Acme Vision",
    "project_slug": "acme-vision",
    "package_name": "acme_vision",
}
SUBDIR = "templates/lightning"  # where the template lies for `--directory`


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template as a folder, a bare git repository, a zip, and a repository holding it
    in a subfolder."""
    base = tmp_path_factory.mktemp("sources")
    work = snapshot_repo(base / "template")
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(base / "template.git")], check=True
    )
    git(
        work,
        "archive",
        "--format=zip",
        "--prefix=template-main/",
        "-o",
        str(base / "t.zip"),
        "HEAD",
    )
    snapshot_repo(base / "monorepo", subdir=SUBDIR)
    return base


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


def cookiecutter_cli(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cookiecutter", "--no-input", "--config-file", str(config), *args]


@pytest.mark.parametrize(
    "source", ["relative path", "git URL", "zip", "--directory", "cruft --directory"]
)
def test_the_template_is_found_without_proc_or_pwd_however_it_is_fetched(
    gen: ModuleType,
    template: object,
    sources: Path,
    tmp_path: Path,
    cc_config: Path,
    source: str,
) -> None:
    """The hook learns where the template is from where cookiecutter renders it, never from
    /proc (none on macOS or Windows) or PWD (not always set, nor where cookiecutter runs)."""
    out = tmp_path / "OUT"
    name = "project_name=Acme Vision"
    command = {
        "relative path": cookiecutter_cli(cc_config, "template", "-o", str(out), name),
        "git URL": cookiecutter_cli(
            cc_config, f"file://{sources / 'template.git'}", "-o", str(out), name
        ),
        "zip": cookiecutter_cli(cc_config, str(sources / "t.zip"), "-o", str(out), name),
        "--directory": cookiecutter_cli(
            cc_config, str(sources / "monorepo"), "--directory", SUBDIR, "-o", str(out), name
        ),
        "cruft --directory": [
            *(sys.executable, "-m", "cruft", "create", str(sources / "monorepo")),
            *("--directory", SUBDIR, "--no-input", "--output-dir", str(out)),
            *("--extra-context", json.dumps({"project_name": "Acme Vision"})),
        ],
    }[source]
    start = time.perf_counter()
    result = subprocess.run(
        command,
        cwd=sources,
        env=without_proc_or_pwd(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"{source}: {time.perf_counter() - start:.2f} s")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    project = out / "acme-vision"
    files = project_files(project)
    state = json.loads(files.pop(".cruft.json", "null"))
    assert files == rendered(gen, template, project)
    if source != "zip":  # cookiecutter unpacks with zipfile, which drops permission bits
        assert (project / ".ci" / "run").stat().st_mode & 0o111
    # `make update` knows where the project came from, however it was made from git.
    origin = {
        "relative path": (str((sources / "template").resolve()), None),
        "git URL": (f"file://{sources / 'template.git'}", None),
        "zip": None,  # no git history: nothing to update from
        "--directory": (str((sources / "monorepo").resolve()), SUBDIR),
        "cruft --directory": (str(sources / "monorepo"), SUBDIR),
    }[source]
    if origin is None:
        assert state is None
    else:
        assert (state["template"], state["directory"]) == origin
        assert state["checkout"] is None  # none asked for: null, not the text "None"
        assert state["context"]["cookiecutter"]["package_name"] == "acme_vision"
        assert len(state["commit"]) == 40


def cruft_create(repo: Path, out: Path, **answers: str) -> Path:
    created = subprocess.run(
        [
            *(sys.executable, "-m", "cruft", "create", str(repo), "--no-input"),
            *("--output-dir", str(out), "--extra-context", json.dumps(answers)),
        ],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    project = out / "acme-vision"
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "generated")
    return project


def commit_edit(repo: Path, path: str, old: str, new: str) -> None:
    text = (repo / path).read_text()
    assert old in text
    (repo / path).write_text(text.replace(old, new))
    git(repo, "commit", "-q", "-am", f"{path}: {new}")


def make_update(project: Path) -> subprocess.CompletedProcess[str]:
    return make_in(project, "update", timeout=300)


def test_cruft_create_then_make_update_brings_template_changes_renamed(
    gen: ModuleType, template: object, tmp_path: Path
) -> None:
    repo = snapshot_repo(tmp_path / "template")
    project = cruft_create(repo, tmp_path / "OUT", project_name="Acme Vision", logger="csv")
    files = project_files(project)
    state = json.loads(files.pop(".cruft.json"))
    assert state["context"]["cookiecutter"]["package_name"] == "acme_vision"
    assert files == rendered(gen, template, project, logger="csv")

    # The template moves on; the project follows, renamed and configured.
    (repo / "src" / "my_project" / "extra.py").write_text('NAME = "my_project"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "extra module")
    updated = make_update(project)
    assert updated.returncode == 0, updated.stdout[-2000:] + updated.stderr[-3000:]
    assert "\nNext:\n" not in updated.stdout  # no first commands of cruft's temporary copy
    assert (project / "src" / "acme_vision" / "extra.py").read_text() == 'NAME = "acme_vision"\n'
    assert "  - logger: csv" in (project / "configs" / "train.yaml").read_text()
    assert (
        json.loads((project / ".cruft.json").read_text())["commit"]
        == git(repo, "rev-parse", "HEAD").strip()
    )


def test_a_project_cookiecutter_made_from_git_updates_with_make_update(
    gen: ModuleType, template: object, tmp_path: Path, cc_config: Path
) -> None:
    """Not only cruft's: the generator records the template and commit as cruft would."""
    repo = snapshot_repo(tmp_path / "template")
    out = tmp_path / "OUT"
    made = subprocess.run(
        cookiecutter_cli(
            cc_config, f"git+file://{repo}", "-o", str(out), "project_name=Acme Vision"
        ),
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    project = out / "acme-vision"
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "generated")
    (repo / "src" / "my_project" / "extra.py").write_text('NAME = "my_project"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "extra module")
    updated = make_update(project)
    assert updated.returncode == 0, updated.stdout[-2000:] + updated.stderr[-3000:]
    assert (project / "src" / "acme_vision" / "extra.py").read_text() == 'NAME = "acme_vision"\n'


def test_make_update_without_a_template_history_says_how_to_link_one(
    gen: ModuleType, template: object, tmp_path: Path
) -> None:
    project = tmp_path / "acme-vision"
    gen.write(gen.render(template, ACME), project)  # as a zip of the template makes it
    result = make_update(project)
    assert result.returncode == 2
    assert "no .cruft.json" in result.stdout and "cruft link" in result.stdout


def test_make_update_that_conflicts_exits_nonzero_naming_the_file(tmp_path: Path) -> None:
    """cruft leaves conflict markers and exits 0 ("Good work!"); `make update` does not."""
    repo = snapshot_repo(tmp_path / "template")
    project = cruft_create(repo, tmp_path / "OUT", project_name="Acme Vision")
    trainer = "configs/trainer/default.yaml"
    commit_edit(project, trainer, "\nmax_epochs: 20\n", "\nmax_epochs: 30\n")  # the team's
    commit_edit(repo, trainer, "\nmax_epochs: 20\n", "\nmax_epochs: 50\n")  # the template's

    updated = make_update(project)
    assert updated.returncode != 0
    assert (
        f"merge these by hand (conflict markers, or a .rej file of the rejected change):\n  {trainer}\n"
        in updated.stdout
    )
    assert "<<<<<<<" in (project / trainer).read_text()  # what there is to merge
