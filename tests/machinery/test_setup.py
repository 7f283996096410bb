"""Set-up from a fresh clone: `make train` and `make test` create the virtual environment from
the hashed lock (requirements/lock.txt) and install nothing the second time; the lock stays the
one pyproject.toml asks for."""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
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


def dry_run(target: str, venv: Path, *variables: str) -> str:
    result = subprocess.run(
        ["make", "--dry-run", target, f"VENV={venv}", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@needs_make
@pytest.mark.parametrize("target", ["train", "test"])
def test_the_first_make_installs_the_environment_and_the_second_installs_nothing(
    target: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    first = dry_run(target, venv).replace('"', "")
    assert f"python3 requirements/install.py {venv} --torch torch==2.13.0" in first, first
    assert "--torch-build auto" in first
    command = {
        "train": "train.py",
        "test": '-m pytest -n auto --dist loadfile -m "not soak and not exhaustive and not slurm"',
    }[target]
    assert command.replace('"', "") in first.splitlines()[-1]

    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()  # newer than the lock and pyproject.toml: installed
    second = dry_run(target, venv)
    assert "install.py" not in second and "pip install" not in second
    assert command in second


def install_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install", ROOT / "requirements" / "install.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


VENV = Path("/no/such/venv")


def planned(capsys: pytest.CaptureFixture[str], **machine: object) -> list[str]:
    """The install's steps and commands as `--dry-run` prints them, on a given machine, for an
    environment not made yet."""
    install = install_module()
    machine = {"torch_build": "auto", "system": "Linux", "driver": False, **machine}
    probe = machine.pop("probe", lambda url: None)
    install.install(VENV, "torch==2.13.0", dry_run=True, probe=probe, **machine)
    return capsys.readouterr().out.splitlines()


def test_the_install_says_each_step_with_its_size_and_runs_pip_with_its_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = planned(capsys)
    steps = [line for line in lines if line.startswith("==> [")]
    assert [s[:10] for s in steps] == ["==> [1/4] ", "==> [2/4] ", "==> [3/4] ", "==> [4/4] "]
    commands = [line for line in lines if line.startswith("$ ")]
    assert [c.split(" -m pip ")[-1] for c in commands if " -m pip " in c] == [
        "install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu",
        "install --require-hashes --no-deps -r requirements/lock.txt",
        "install --no-deps --no-build-isolation -e .",
        "check",
    ]
    assert commands[0].endswith(f"-m venv {VENV}")
    assert f"$ {VENV}/bin/python requirements/lock.py check" in commands
    # what each big step installs and how big it is
    text = "\n".join(lines)
    assert "torch==2.13.0, the CPU build: no NVIDIA driver found (TORCH_BUILD=cuda" in text
    assert "about 190 MB to download" in text and "about 330 MB to download" in text


@pytest.mark.parametrize(
    ("build", "system", "driver", "index"),
    [
        ("auto", "Linux", False, "https://download.pytorch.org/whl/cpu"),
        ("auto", "Linux", True, None),  # PyPI's Linux wheel: the CUDA build
        ("cuda", "Linux", False, None),
        ("cpu", "Linux", True, "https://download.pytorch.org/whl/cpu"),
        ("auto", "Darwin", False, None),  # PyPI's macOS wheel: CPU and MPS
        ("cpu", "Windows", False, None),  # PyPI's Windows wheel is the CPU build
    ],
)
def test_linux_without_a_driver_takes_the_cpu_build_and_a_driver_or_a_request_the_cuda_one(
    build: str, system: str, driver: bool, index: str | None
) -> None:
    step = install_module().choose_torch(build, system, driver)
    assert step.index == index
    assert step.build == {None: "cuda" if system == "Linux" else "pypi"}.get(index, "cpu")


def test_the_cpu_index_is_given_to_the_torch_step_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = [line for line in planned(capsys) if line.startswith("$ ")]
    with_index = [c for c in commands if "--extra-index-url" in c or "--index-url" in c]
    assert len(with_index) == 1 and " install torch==2.13.0 " in with_index[0]


def test_an_index_that_cannot_be_reached_is_left_out_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = planned(capsys, probe=lambda url: "Name or service not known")
    text = "\n".join(lines)
    assert (
        "https://download.pytorch.org/whl/cpu cannot be reached (Name or service not known" in text
    )
    assert "torch comes from pip's own index and links" in text
    assert f"$ {VENV}/bin/python -m pip install torch==2.13.0" in lines


def installed_as(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    taken: str,
    **machine: object,
) -> str:
    """What the install prints where pip's torch step installs torch `taken` (its commands not
    run): on Linux without an NVIDIA driver, into an environment with no torch yet."""
    install = install_module()
    versions = iter([None, taken])  # before and after the torch step
    monkeypatch.setattr(install, "installed_torch", lambda python: next(versions))
    monkeypatch.setattr(install.Steps, "run", lambda self, *command: None)
    monkeypatch.setattr(install, "disk_size", lambda path: "4.7 GB")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    machine = {"torch_build": "auto", "system": "Linux", "driver": False, **machine}
    install.install(venv, "torch==2.13.0", probe=lambda url: "Name or service not known", **machine)
    return capsys.readouterr().out


def test_pypis_cuda_build_taken_for_the_cpu_one_is_said_after_the_step_and_at_the_end(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = installed_as(capsys, monkeypatch, tmp_path, "2.13.0")
    step = " ".join(out[out.index("==> [2/4]") : out.index("==> [3/4]")].split())
    assert (
        "torch 2.13.0 is PyPI's CUDA build, not the CPU build this step set out to install: "
        "https://download.pytorch.org/whl/cpu could not be reached (Name or service not known)"
    ) in step
    assert f"remove {tmp_path / 'venv'}, then run `make` again where that index answers" in step
    assert "torch 2.13.0 (PyPI's CUDA build), 0 s;" in step
    last = out.splitlines()[-1]
    assert "venv is 4.7 GB, with PyPI's CUDA build of torch, not the CPU build (step 2" in last


def test_the_cpu_build_from_pips_own_links_is_what_was_asked_and_says_nothing_more(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = installed_as(capsys, monkeypatch, tmp_path, "2.13.0+cpu")
    assert "torch 2.13.0+cpu (CPU build), 0 s;" in out
    assert "set out to install" not in out and "not the CPU build" not in out


def test_the_probe_gives_up_within_seconds_on_a_refused_or_silent_index() -> None:
    """A refused connection answers at once; a server that accepts and never answers is left
    after the probe's timeout, not pip's minutes of retries."""
    unreachable = install_module().unreachable
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    start = time.monotonic()
    assert unreachable(f"http://127.0.0.1:{port}/whl/cpu", timeout=5) is not None
    assert time.monotonic() - start < 3
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = time.monotonic()
        why = unreachable(f"http://127.0.0.1:{silent.getsockname()[1]}/whl/cpu", timeout=1)
        assert why is not None and time.monotonic() - start < 3
    with socket.socket() as server:  # any HTTP answer is a reachable index
        server.bind(("127.0.0.1", 0))
        server.listen()
        answer = threading.Thread(target=_answer_once, args=(server,), daemon=True)
        answer.start()
        assert unreachable(f"http://127.0.0.1:{server.getsockname()[1]}/whl/cpu") is None
        answer.join(timeout=10)


def _answer_once(server: socket.socket) -> None:
    connection, _ = server.accept()
    with connection:
        connection.recv(4096)
        connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


def test_a_torch_build_that_is_none_is_one_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    assert install_module().main(["venv", "--torch-build", "gpu", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: TORCH_BUILD=gpu is not a torch build: choose auto")
    assert "cpu or cuda" in err


def test_too_old_a_python_is_refused_naming_the_one_to_use(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install = install_module()
    monkeypatch.setattr(install, "requires_python", lambda: (3, 99))
    assert install.main([str(tmp_path / "venv"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "is older than this project needs (requires-python >=3.99 in pyproject.toml)" in err
    assert "`make train PYTHON3=python3.99`" in err
    assert not (tmp_path / "venv").exists()


@pytest.mark.slow
def test_a_real_install_falls_back_within_seconds_and_shows_pips_progress(tmp_path: Path) -> None:
    """requirements/install.py, run as the Makefile runs it, into an environment that sees
    this one's packages (nothing is downloaded), with torch's index unreachable: every step
    runs, pip's own lines show, and the torch step falls back at once."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    parents = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    )
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    start = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "requirements" / "install.py"), str(venv)),
            *("--torch", "torch>=2.4", "--torch-build", "cpu"),
            *("--torch-index", f"http://127.0.0.1:{port}/whl/cpu"),
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert f"http://127.0.0.1:{port}/whl/cpu cannot be reached" in out
    assert "Requirement already satisfied: torch>=2.4" in out  # pip's own output, not -q
    assert "Requirement already satisfied: lightning==" in out
    torch_step = out[out.index("==> [2/4]") : out.index("==> [3/4]")]
    seconds = int(re.search(r"\n    torch [^,]+, (\d+) s;", torch_step).group(1))
    assert seconds < 30, torch_step
    assert re.search(r"==> Installed in \d+ s; .*venv is [\d.]+ [MG]B\.", out)
    print(f"install into a layered environment: {time.monotonic() - start:.0f} s")


def floors_module() -> ModuleType:
    sys.path.insert(0, str(ROOT / "requirements"))
    try:
        spec = importlib.util.spec_from_file_location("floors", ROOT / "requirements" / "floors.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "requirements"))
    return module


@needs_make
def test_the_floors_are_the_lowest_direct_versions_in_an_environment_of_their_own(
    tmp_path: Path,
) -> None:
    """`make test-floors`: uv resolves pyproject.toml's every extra at the lowest versions it
    names, without torch, into `.venv-floors` (git-ignored), then runs the fast tier there."""
    floors = floors_module()
    command = floors.compile_command(Path("uv"), Path("f/bin/python"), Path("f/floors.txt"))
    joined = " ".join(command)
    assert "pip compile pyproject.toml --all-extras --resolution lowest-direct" in joined
    assert "--overrides requirements/without-torch.txt --no-emit-package torch" in joined
    assert "--generate-hashes" in joined
    floors_dir = tmp_path / "floors"
    plan = dry_run("test-floors", tmp_path / "venv", f"FLOORS={floors_dir}")
    assert f"rm -rf {floors_dir}\n" in plan and f"requirements/floors.py {floors_dir} " in plan
    assert f"{floors_dir}/bin/python -m pytest -n auto --dist loadfile \\\n" in plan
    assert '-m "not slow and not soak and not exhaustive"' in plan
    assert f"{floors_dir}/bin/python -m ruff check ." in plan  # and make lint's other checks
    assert f"{floors_dir}/bin/python -m mypy --cache-dir {floors_dir}/.mypy_cache" in plan
    # by default a folder of its own, which git ignores
    assert "FLOORS ?= .venv-floors\n" in (ROOT / "Makefile").read_text()
    assert ".venv-floors/" in (ROOT / ".gitignore").read_text().splitlines()
    all_tiers = dry_run("test-all", tmp_path / "venv", f"FLOORS={floors_dir}")
    assert "test-floors ARGS=" in all_tiers


@pytest.mark.skipif(sys.platform != "linux", reason="the CPU build's own index is Linux's")
def test_the_floors_keep_the_main_torch_where_no_old_cpu_build_can_be_had() -> None:
    floors = floors_module()
    floor = floors.torch_floor(lock_module().declared())
    assert floor and floor.startswith("torch==")
    kept, why = floors.floor_torch("torch==2.13.0", "cpu", "", probe=lambda url: "no route")
    assert kept == "torch==2.13.0"
    assert "cannot be reached (no route)" in why and f"not its floor {floor}" in why
    taken, why = floors.floor_torch("torch==2.13.0", "cpu", "", probe=lambda url: None)
    assert taken == floor and "the floor of pyproject.toml's range" in why


def test_ci_runs_the_readme_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Quickstart")
    quickstart = readme[start : readme.index("\n## ", start + 1)]
    assert "make train" in quickstart and "make test" in quickstart
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nmake lint\n" in ci and ("\nmake test\n" in ci or "\nmake test-all\n" in ci)
    assert "pip install" not in ci  # the Makefile installs, from the lock
