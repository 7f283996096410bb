"""The first `make`'s install, one numbered step at a time (the Makefile's `$(VENV)/.installed`).

Every step says what it installs and about how big it is, shows pip's own progress, and ends
with its time and the environment's size on disk:

1. the virtual environment, made by the Python that runs this script (the Makefile's PYTHON3);
2. torch, pinned (TORCH), in the build this machine needs (TORCH_BUILD): on Linux the CPU build
   unless an NVIDIA driver is found (PyPI's Linux wheel pulls about 2.7 GB of CUDA libraries).
   The CPU build's index is given to this step alone, never to the locked packages; an index
   that cannot be reached within seconds is left out, and pip's own index and links serve;
3. every other dependency, exactly as requirements/lock.txt pins them, hashes verified;
4. the project itself, editable, then `pip check`.

Standard library only: it runs under the machine's Python before anything is installed.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_INDEX = "https://download.pytorch.org/whl/cu126"  # an example, in advice only
PROBE_SECONDS = 5.0  # an index that does not answer in this time is left out
BUILDS = ("auto", "cpu", "cuda")
ASKED_BUILD = {
    "cpu": "the CPU build",
    "cuda": "a CUDA build",
}  # what the torch step sets out to take
# What each step downloads and installs, measured on Linux x86-64 with Python 3.11 (README,
# "Quickstart"); other platforms differ a little. PyPI's CUDA build was not installed here:
# its download is PyPI's listing of torch 2.13.0's wheels and the CUDA wheels they require.
SIZE_CPU = "about 190 MB to download, 0.8 GB installed"
SIZE_CUDA = "about 2.7 GB to download with its CUDA libraries"
SIZE_LOCK = "about 330 MB to download, 1.3 GB installed (173 packages on Linux, Python 3.11)"


class InstallError(Exception):
    """A setting or a machine the install cannot work with: one paragraph, exit 2."""


@dataclass(frozen=True)
class TorchStep:
    """How torch is installed: the build, why, and the pip options that take it."""

    build: str  # "cpu", "cuda" or "pypi" (PyPI's wheel, whatever it is on this system)
    why: str
    index: str | None  # the extra index of this step alone, None for pip's own


def choose_torch(requested: str, system: str, driver: bool, index: str = "") -> TorchStep:
    """The torch build for `TORCH_BUILD=requested` on `system` (platform.system()), given
    whether an NVIDIA driver is present; `index` (TORCH_INDEX) overrides the index."""
    if requested not in BUILDS:
        raise InstallError(
            f"TORCH_BUILD={requested} is not a torch build: choose auto (the CPU build on Linux "
            "without an NVIDIA driver, else PyPI's), cpu or cuda, e.g. `make train "
            "TORCH_BUILD=cpu`."
        )
    if system != "Linux":  # PyPI's macOS wheel is the CPU/MPS build, Windows' the CPU build
        step = TorchStep("pypi", f"PyPI's build for {system}", None)
    elif requested == "cuda":
        step = TorchStep("cuda", "the CUDA build (TORCH_BUILD=cuda)", None)
    elif requested == "cpu":
        step = TorchStep("cpu", "the CPU build (TORCH_BUILD=cpu)", CPU_INDEX)
    elif driver:
        step = TorchStep(
            "cuda", "the CUDA build: an NVIDIA driver is installed (TORCH_BUILD=cpu for CPU)", None
        )
    else:
        step = TorchStep(
            "cpu",
            "the CPU build: no NVIDIA driver found (TORCH_BUILD=cuda for the CUDA build)",
            CPU_INDEX,
        )
    if index:
        step = TorchStep(step.build, f"{step.why}, from TORCH_INDEX", index)
    return step


def nvidia_driver_found() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def unreachable(url: str, timeout: float = PROBE_SECONDS) -> str | None:
    """Why `url` cannot be reached within `timeout` seconds, or None when its server answers.

    One request, through the proxy the environment names, as pip would. Any HTTP answer and a
    certificate this Python does not trust both count as reachable: pip (with its own `cert`
    setting) decides then. Without this probe pip retries an unanswered index 5 times, up to
    its timeout each (15 minutes at pip's default)."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return None
        return str(err.reason)
    except ssl.SSLError:
        return None
    except OSError as err:  # a read timeout, a reset
        return str(err) or type(err).__name__


def requires_python(pyproject: Path = ROOT / "pyproject.toml") -> tuple[int, int]:
    """The lowest Python of pyproject.toml's `requires-python = ">=3.x"`."""
    found = re.search(
        r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)', pyproject.read_text(encoding="utf-8"), re.M
    )
    return (int(found.group(1)), int(found.group(2))) if found else (3, 10)


def disk_size(path: Path) -> str:
    """What `du -sh` says of a folder, in the same units."""
    total = 0
    for here, _, files in os.walk(path):
        for name in [os.curdir, *files]:  # the folder itself counts, as du counts it
            try:
                total += os.lstat(os.path.join(here, name)).st_blocks * 512
            except OSError:
                continue
    if total >= 2**30:  # rounded up, as du rounds
        return f"{math.ceil(total / 2**30 * 10) / 10:.1f} GB"
    return f"{math.ceil(total / 2**20)} MB"


def installed_torch(python: Path) -> str | None:
    """The version of torch in the environment of `python` (e.g. 2.13.0+cpu), or None."""
    found = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def build_of(version: str, system: str) -> str:
    """What a torch version's local label says of its build."""
    label = version.partition("+")[2]
    if label == "cpu":
        return "CPU build"
    if label.startswith(("cu", "rocm")):
        return f"{label} build"
    return "PyPI's CUDA build" if system == "Linux" else f"PyPI's build for {system}"


def build_change(step: TorchStep, version: str | None, why: str | None, venv: Path) -> str | None:
    """What to say when the torch pip installed is not the build `step` asked for (the CPU
    build asked, PyPI's CUDA build taken where the CPU index could not be reached), or None.
    `why`: why the step's index was left out, if it was. Linux only: elsewhere the step takes
    PyPI's wheel, whatever it is."""
    if not version or step.build not in ("cpu", "cuda"):
        return None
    taken = "cpu" if version.partition("+")[2] == "cpu" else "cuda"
    if taken == step.build:
        return None
    asked = ASKED_BUILD[step.build]
    source = f"{step.index} could not be reached ({why}), so pip" if why else "pip"
    if step.build == "cpu":
        cost = "It runs on the CPU too, with about 2.7 GB of CUDA libraries beside it."
        again = "where that index answers, or with TORCH_INDEX=<an index that holds it>"
    else:
        cost = "It uses no GPU."
        again = f"with TORCH_INDEX={CUDA_INDEX} (or another CUDA version's)"
    return (
        f"torch {version} is {build_of(version, 'Linux')}, not {asked} this step set out to "
        f"install: {source} took the build its own index and links hold. {cost} For {asked}: "
        f"remove {venv}, then run `make` again {again}."
    )


def pinned(version: str | None, requirement: str) -> bool:
    """Whether an installed torch `version` is the one `requirement` (`torch==X`) pins."""
    pin = re.fullmatch(r"\s*torch\s*==\s*([\w.]+)\s*", requirement)
    return bool(version and pin and version.partition("+")[0] == pin.group(1))


class Steps:
    """Numbered steps that print what they do, run commands with their output shown, and end
    with their time and the environment's size."""

    def __init__(self, venv: Path, total: int, dry_run: bool) -> None:
        self.venv, self.total, self.dry_run = venv, total, dry_run
        self.number = 0
        self.started = time.monotonic()

    def begin(self, title: str, *details: str) -> None:
        self.number += 1
        self.step_started = time.monotonic()
        print(f"==> [{self.number}/{self.total}] {title}", flush=True)
        for line in details:
            print(f"    {line}", flush=True)

    def run(self, *command: str | Path) -> None:
        shown = " ".join(shlex.quote(str(part)) for part in command)
        print(f"$ {shown}", flush=True)
        if not self.dry_run:
            subprocess.run([str(part) for part in command], check=True)

    def end(self, note: str = "") -> None:
        if self.dry_run:
            return
        took = time.monotonic() - self.step_started
        size = disk_size(self.venv)
        print(f"    {note}{', ' if note else ''}{took:.0f} s; {self.venv} is {size}", flush=True)


def install(
    venv: Path,
    torch: str,
    torch_build: str,
    torch_index: str = "",
    dry_run: bool = False,
    probe: Callable[[str], str | None] = unreachable,
    system: str | None = None,
    driver: bool | None = None,
) -> None:
    system = system or platform.system()
    step = choose_torch(
        torch_build, system, nvidia_driver_found() if driver is None else driver, torch_index
    )
    python = venv / "bin" / "python"
    steps = Steps(venv, total=4, dry_run=dry_run)

    floor = requires_python()
    if python.exists():
        steps.begin(f"The virtual environment {venv}: there already")
    else:
        if sys.version_info[:2] < floor:
            raise InstallError(
                f"Python {platform.python_version()} ({sys.executable}) is older than this "
                f"project needs (requires-python >={floor[0]}.{floor[1]} in pyproject.toml): "
                f"name a newer one, e.g. `make train PYTHON3=python{floor[0]}.{floor[1]}`."
            )
        steps.begin(f"The virtual environment {venv}, Python {platform.python_version()}")
        steps.run(sys.executable, "-m", "venv", venv)
        steps.end()

    changed = ""  # torch's build, where it is not the one the torch step set out to install
    version = None if dry_run else installed_torch(python)
    if pinned(version, torch):
        steps.begin(
            f"{torch}: there already ({version}, {build_of(version or '', system)})",
            f"to change its build: remove {venv}, then `make ... TORCH_BUILD=cpu` or `cuda`.",
        )
    else:
        size = SIZE_CPU if step.build == "cpu" else SIZE_CUDA if system == "Linux" else ""
        steps.begin(f"{torch}, {step.why}", *([size] if size else []))
        options: list[str] = []
        why = None
        if step.index:
            probe_started = time.monotonic()
            why = probe(step.index)
            if why is None:
                print(f"    from {step.index} (for this step only)", flush=True)
                options = ["--extra-index-url", step.index]
            else:
                took = time.monotonic() - probe_started
                print(
                    f"    {step.index} cannot be reached ({why}, after {took:.1f} s).\n"
                    "    torch comes from pip's own index and links (`pip config list`): a CPU "
                    "build\n    where they hold one (a local wheel, a mirror), else PyPI's (on "
                    "Linux the CUDA build).",
                    flush=True,
                )
        steps.run(python, "-m", "pip", "install", torch, *options)
        version = None if dry_run else installed_torch(python)
        change = build_change(step, version, why, venv)
        if change:
            changed = f"{build_of(version or '', system)} of torch, not {ASKED_BUILD[step.build]}"
            wrapped = textwrap.fill(change, 92, break_long_words=False, break_on_hyphens=False)
            print(textwrap.indent(wrapped, "    "), flush=True)
        steps.end(f"torch {version} ({build_of(version, system)})" if version else "")

    lock = "requirements/lock.txt"
    steps.begin(
        f"The locked dependencies, {lock}: exact versions, hashes verified",
        SIZE_LOCK,
        "pip lists each package as it fetches it (from its cache when it has it), then "
        "installs them together: a quiet minute or two.",
    )
    steps.run(python, "-m", "pip", "install", "--require-hashes", "--no-deps", "-r", lock)
    steps.run(python, "requirements/lock.py", "check")
    steps.end()

    steps.begin("This project, editable (src/ is imported from here), and `pip check`")
    steps.run(python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", ".")
    steps.run(python, "-m", "pip", "check")
    steps.end()
    if not dry_run:
        took = time.monotonic() - steps.started
        with_build = f", with {changed} (step 2 says why)" if changed else ""
        print(
            f"==> Installed in {took:.0f} s; {venv} is {disk_size(venv)}{with_build}. The next "
            "`make` installs nothing until requirements/lock.txt or pyproject.toml changes.",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("--torch", default="torch", help="torch's requirement (TORCH)")
    parser.add_argument("--torch-build", default="auto", help="auto, cpu or cuda (TORCH_BUILD)")
    parser.add_argument("--torch-index", default="", help="torch's extra index (TORCH_INDEX)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    args = parser.parse_args(argv)
    venv = args.venv.resolve()  # every step runs in the project's folder, shown relative to it
    os.chdir(ROOT)
    if not os.path.relpath(venv, ROOT).startswith(".."):
        venv = Path(os.path.relpath(venv, ROOT))
    try:
        install(venv, args.torch, args.torch_build, args.torch_index, args.dry_run)
    except InstallError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"Error: the step above failed (exit status {err.returncode}).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
