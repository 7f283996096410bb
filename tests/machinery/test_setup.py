"""Set-up from a fresh clone: `make train` and `make test` create the virtual environment from
the hashed lock (requirements/lock.txt) and install nothing the second time; the lock stays the
one pyproject.toml asks for."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .helpers import ROOT, clean_env

LOCK = ROOT / "requirements" / "lock.txt"
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def lock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock", ROOT / "requirements" / "lock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(lock: Path = LOCK) -> dict[str, list[tuple[Version, str, int]]]:
    """Every `name==version ; marker` entry of a requirements file with its number of hashes."""
    found: dict[str, list[tuple[Version, str, int]]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", lock.read_text()):
        if entry.startswith("#") or not entry.strip():
            continue
        head = entry.split("\\", 1)[0].strip()
        name, _, rest = head.partition("==")
        version, _, marker = rest.partition(";")
        found.setdefault(canonicalize_name(name), []).append(
            (Version(version.strip()), marker.strip(), entry.count("--hash=sha256:"))
        )
    return found


def test_the_lock_was_made_for_this_pyproject() -> None:
    assert lock_module().problem() is None


def test_a_changed_dependency_list_makes_the_lock_stale_and_says_make_lock(tmp_path: Path) -> None:
    lock = lock_module()
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()
    pyproject.write_text(text.replace('    "rich>=13",\n', '    "rich>=13",\n    "polars",\n', 1))
    assert pyproject.read_text() != text
    found = lock.problem(LOCK, pyproject)
    assert found is not None and "`make lock`" in found
    # A change elsewhere in pyproject.toml (a tool's setting) keeps the lock valid.
    pyproject.write_text(text.replace("line-length = 100", "line-length = 99"))
    assert lock.problem(LOCK, pyproject) is None


def test_every_locked_package_is_pinned_with_hashes_and_torch_is_not_locked() -> None:
    locked = pins()
    assert len(locked) > 50
    for name, entries in locked.items():
        for version, _, hashes in entries:
            assert hashes >= 1, f"{name}=={version} has no hash"
    # torch is the Makefile's (TORCH): the machine's own build, CPU or CUDA; nor its CUDA wheels.
    assert "torch" not in locked
    assert not [name for name in locked if name.startswith(("nvidia-", "triton"))]


def test_the_lock_satisfies_every_requirement_of_pyproject_and_no_known_bad_release() -> None:
    declared = lock_module().declared()
    requirements = [*declared["dependencies"]]
    for extra in declared["optional-dependencies"].values():
        requirements += extra
    locked = pins()
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "torch":
            continue
        assert name in locked, f"{requirement} is not in the lock"
        for version, _, _ in locked[name]:
            assert requirement.specifier.contains(version, prereleases=True), (text, version)
    # GHSA-w37p-236h-pfx3: lightning 2.6.2 and 2.6.3 carried a credential-stealing payload.
    for name in ("lightning", "pytorch-lightning"):
        requirement = next(Requirement(r) for r in requirements if Requirement(r).name == name)
        for bad in ("2.6.2", "2.6.3"):
            assert not requirement.specifier.contains(bad), f"pyproject.toml admits {name} {bad}"
            assert Version(bad) not in [v for v, _, _ in locked[name]]


@pytest.mark.slow
def test_a_package_whose_hash_does_not_match_the_lock_is_refused(tmp_path: Path) -> None:
    """pip's hash-checking mode, as `make install` runs it, on one locked package."""
    entry = next(  # a small package every platform installs (no marker)
        e
        for e in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text())
        if e.startswith(("iniconfig==", "mdurl==")) and ";" not in e.split("\\")[0]
    )
    tampered = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, entry)
    (tmp_path / "lock.txt").write_text(tampered + "\n")
    command = [sys.executable, "-m", "pip", "install", "--require-hashes", "--no-deps"]
    command += ["--target", str(tmp_path / "site"), "-r", str(tmp_path / "lock.txt")]
    refused = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert refused.returncode != 0
    assert "DO NOT MATCH THE HASHES" in refused.stderr
    (tmp_path / "lock.txt").write_text(entry + "\n")
    accepted = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert accepted.returncode == 0, accepted.stderr[-2000:]


def dry_run(target: str, venv: Path) -> str:
    result = subprocess.run(
        ["make", "--dry-run", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@needs_make
@pytest.mark.parametrize("target", ["train", "test"])
def test_the_first_make_creates_the_environment_from_the_lock_and_the_second_installs_nothing(
    target: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    first = dry_run(target, venv)
    steps = [
        f"python3 -m venv {venv}",
        "pip install -q torch==2.13.0",
        "pip install -q --require-hashes --no-deps -r requirements/lock.txt",
        "requirements/lock.py check",
        "pip install -q --no-deps --no-build-isolation -e .",
        "pip check",
    ]
    flat = first.replace('"', "")
    positions = [flat.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), first
    command = {
        "train": "train.py",
        "test": '-m pytest -n auto --dist loadfile -m "not soak and not exhaustive"',
    }[target]
    assert command in first.splitlines()[-1]

    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()  # newer than the lock and pyproject.toml: installed
    second = dry_run(target, venv)
    assert "pip install" not in second and "-m venv" not in second
    assert command in second


def test_ci_runs_the_readme_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Quickstart")
    quickstart = readme[start : readme.index("\n## ", start + 1)]
    assert "make train" in quickstart and "make test" in quickstart
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nmake lint\n" in ci and ("\nmake test\n" in ci or "\nmake test-all\n" in ci)
    assert "pip install" not in ci  # the Makefile installs, from the lock
