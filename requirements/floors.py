"""The floors environment (`make test-floors`): the lowest versions pyproject.toml allows.

pyproject.toml's ranges promise that every version they admit works; the lock only shows the
newest. Here uv resolves the same dependency lists (every extra: the tests use them all) with
`--resolution lowest-direct`: each dependency pyproject.toml names at the lowest version its
range allows, what they pull in at the newest that fits. The environment is a folder of its own
(FLOORS in the Makefile, `.venv-floors`, git-ignored), made again when pyproject.toml changes;
the main `.venv` is not touched.

torch is the exception, as in the main install: its floor (`torch>=X` gives `torch==X`) in the
build requirements/install.py picks. Where that is the CPU build and its index cannot be
reached, no old CPU build can be had (PyPI's Linux wheels are the CUDA build, gigabytes), so the
environment keeps the main install's torch (TORCH) and says so.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import install  # requirements/install.py, beside this file
import lock

ROOT = install.ROOT
TORCH_FLOOR = re.compile(r"^torch\s*>=\s*([\w.]+)")


def torch_floor(declared: dict[str, object]) -> str | None:
    """`torch==X` for pyproject.toml's `torch>=X`, or None when it has no floor."""
    for requirement in declared["dependencies"]:  # type: ignore[attr-defined]
        found = TORCH_FLOOR.match(str(requirement))
        if found:
            return f"torch=={found.group(1)}"
    return None


def floor_torch(
    pinned: str, build: str, index: str, probe: Callable[[str], str | None] = install.unreachable
) -> tuple[str, str]:
    """The torch requirement of the floors environment and why (one line)."""
    floor = torch_floor(lock.declared())
    step = install.choose_torch(build, platform.system(), install.nvidia_driver_found(), index)
    if floor is None:
        return pinned, "pyproject.toml gives torch no floor: the main install's"
    if step.index:
        why = probe(step.index)
        if why is not None:
            return pinned, (
                f"{step.index} cannot be reached ({why}), and no other index has an old CPU "
                f"build: torch stays at the main install's {pinned}, not its floor {floor}"
            )
    return floor, f"the floor of pyproject.toml's range, {step.why}"


def compile_command(uv: Path, python: Path, output: Path) -> list[str]:
    """uv's resolution of the floors: every extra, lowest direct versions, hashes, no torch."""
    return [
        *(str(uv), "pip", "compile", "pyproject.toml", "--all-extras"),
        *("--resolution", "lowest-direct", "--python", str(python), "--generate-hashes"),
        *("--overrides", "requirements/without-torch.txt", "--no-emit-package", "torch"),
        *("--custom-compile-command", "make test-floors", "-q", "-o", str(output)),
    ]


def floors_of(requirements: Path) -> dict[str, str]:
    """The version of every package pyproject.toml names, as the floors file pins it."""
    declared = lock.declared()
    names = [*declared["dependencies"]]  # type: ignore[misc]
    for extra in declared["optional-dependencies"].values():  # type: ignore[attr-defined]
        names += extra
    wanted = {re.split(r"[<>=!~ ;\[]", str(name), maxsplit=1)[0].lower() for name in names}
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", requirements.read_text(), re.M)
    return {name: version for name, version in pins if name.lower() in wanted}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("floors", type=Path, help="the environment's folder (FLOORS)")
    parser.add_argument("--python", default="python3", help="the Python that makes it (PYTHON3)")
    parser.add_argument("--torch", default="torch", help="the main install's torch (TORCH)")
    parser.add_argument("--torch-build", default="auto")
    parser.add_argument("--torch-index", default="")
    args = parser.parse_args(argv)
    floors = args.floors.resolve()
    install.os.chdir(ROOT)
    uv = Path(sys.executable).parent / "uv"  # the main environment's (the dev extra)
    python = floors / "bin" / "python"
    steps = install.Steps(floors, total=4, dry_run=False)

    def run(*command: str | Path) -> None:
        steps.run(*command)

    steps.begin(f"The floors environment {args.floors}, apart from the main one")
    run(args.python, "-m", "venv", floors)
    steps.end()

    try:
        requirement, why = floor_torch(args.torch, args.torch_build, args.torch_index)
    except install.InstallError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2
    step = install.choose_torch(
        args.torch_build, platform.system(), install.nvidia_driver_found(), args.torch_index
    )
    steps.begin(f"{requirement}: {why}")
    options = ["--extra-index-url", step.index] if step.index and requirement != args.torch else []
    run(python, "-m", "pip", "install", requirement, *options)
    steps.end()

    resolved = floors / "floors.txt"
    steps.begin(
        "The lowest versions pyproject.toml allows (uv, --resolution lowest-direct), from PyPI",
        "uv fetches in parallel and shows no per-package progress: a minute or two the first time.",
    )
    run(*compile_command(uv, python, resolved))
    run(uv, "pip", "install", "--python", python, "--require-hashes", "--no-deps", "-r", resolved)
    steps.end()

    steps.begin("This project, editable, and `pip check`")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ".")
    run(python, "-m", "pip", "check")
    steps.end()
    shown = ", ".join(f"{n} {v}" for n, v in sorted(floors_of(resolved).items()))
    torch_version = install.installed_torch(python)
    print(f"==> Floors: torch {torch_version}, {shown}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as err:
        print(f"Error: the step above failed (exit status {err.returncode}).", file=sys.stderr)
        sys.exit(1)
