"""The lock file's stamp: which dependency lists of pyproject.toml `requirements/lock.txt` was made for.

`python requirements/lock.py stamp` (run by `make lock`) writes a digest of pyproject.toml's
`dependencies` and `optional-dependencies` into the lock's header; `python requirements/lock.py
check` (run by every install, and by a test) fails when they changed since, naming `make lock`.
uv's and pip-tools' requirements files record no such thing, so a lock could silently go stale.

Standard library only (tomli on Python 3.10, which the lock installs): it runs before and
during the install.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
STAMP = "# pyproject.toml dependencies sha256: "


def declared(pyproject: Path = PYPROJECT) -> dict[str, object]:
    """The dependency lists of pyproject.toml, the only part of it the lock depends on."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return {
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {
            extra: sorted(requirements)
            for extra, requirements in sorted(project.get("optional-dependencies", {}).items())
        },
    }


def digest(pyproject: Path = PYPROJECT) -> str:
    return hashlib.sha256(json.dumps(declared(pyproject), sort_keys=True).encode()).hexdigest()


def recorded(lock: Path = LOCK) -> str | None:
    """The digest the lock was stamped with, if any."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith(STAMP):
            return line.removeprefix(STAMP).strip()
    return None


def stamp(lock: Path = LOCK, pyproject: Path = PYPROJECT) -> None:
    lines = [
        line for line in lock.read_text(encoding="utf-8").splitlines() if not line.startswith(STAMP)
    ]
    header = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    lines.insert(header, STAMP + digest(pyproject))
    lock.write_text("\n".join(lines) + "\n", encoding="utf-8")


def problem(lock: Path = LOCK, pyproject: Path = PYPROJECT) -> str | None:
    """Why the lock does not fit pyproject.toml (one sentence), or None."""
    if not lock.is_file():
        return f"{lock} is missing: run `make lock` to make it."
    if recorded(lock) != digest(pyproject):
        return (
            f"The dependencies in {pyproject.name} changed since {lock.name} was made: run "
            "`make lock` to resolve them again (and commit both files)."
        )
    return None


def main(argv: list[str]) -> int:
    if argv == ["stamp"]:
        stamp()
        return 0
    if argv == ["check"]:
        found = problem()
        if found:
            print(f"Error: {found}", file=sys.stderr)
            return 2
        return 0
    print("usage: python requirements/lock.py stamp|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
