"""What a generated project must hold, computed from the repository root on its own terms
(independently of hooks/project_generator.py), so files added to the root need no test change."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Mapping

from .conftest import ROOT

# The template's own files: never in a generated project.
TEMPLATE_ONLY = (
    "cookiecutter.json",
    "hooks/",
    "{{cookiecutter.project_slug}}/",
    "tests/template/",
    "docs/template.md",
)
CI_WORKFLOW = ".github/workflows/ci.yml"
DEFAULT_NAME = re.compile(r"my[-_ ]project", re.IGNORECASE)
SPEC = json.loads((ROOT / "cookiecutter.json").read_text())
CHOICES = {key: value for key, value in SPEC.items() if isinstance(value, list)}
DEFAULTS = {
    "project_name": SPEC["project_name"],
    "project_slug": "my-project",
    "package_name": "my_project",
    **{key: SPEC[key] for key in ("description", "author_name", "author_email", "devices")},
    **{key: values[0] for key, values in CHOICES.items()},
    "ci_workflow": SPEC["ci_workflow"],
}


def root_files() -> list[str]:
    """The files of the root project: what git would commit, minus the template's own files."""
    return list(_root_files())


@functools.cache
def _root_files() -> tuple[str, ...]:
    listing = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return tuple(
        sorted(
            p
            for p in filter(None, listing.split("\0"))
            if (ROOT / p).is_file()
            and not any(p == t or (t.endswith("/") and p.startswith(t)) for t in TEMPLATE_ONLY)
        )
    )


def renamed(text: str, answers: Mapping[str, object]) -> str:
    names = {
        "my_project": str(answers["package_name"]),
        "my-project": str(answers["project_slug"]),
        "My Project": str(answers["project_name"]),
        "MY_PROJECT": str(answers["package_name"]).upper(),
    }
    return re.sub("|".join(names), lambda m: names[m.group()], text)


def expected_paths(answers: Mapping[str, object]) -> set[str]:
    names = tuple(str(answers[k]) for k in ("project_name", "project_slug", "package_name"))
    return set(_expected_paths(names, bool(answers["ci_workflow"])))


@functools.cache
def _expected_paths(names: tuple[str, str, str], ci_workflow: bool) -> frozenset[str]:
    answers = dict(zip(("project_name", "project_slug", "package_name"), names, strict=True))
    paths = {renamed(p, answers) for p in root_files()}
    paths.add("LICENSE")
    if not ci_workflow:
        paths.discard(CI_WORKFLOW)
    return frozenset(paths)


def without_template_blocks(text: str, markdown: bool = False) -> str:
    """A file minus its template-only blocks: from a comment line `template-only:start` to one
    `template-only:end`, and the blank line after. A Markdown file ends with one
    newline even when its last block went."""
    keep: list[str] = []
    inside = skip_blank = False
    for line in text.splitlines(keepends=True):
        marker = re.match(r"\s*(?:<!--|#)\s*template-only:(start|end)\b", line)
        if marker:
            inside = marker.group(1) == "start"
            skip_blank = not inside
            continue
        if inside or (skip_blank and not line.strip()):
            skip_blank = False
            continue
        skip_blank = False
        keep.append(line)
    kept = "".join(keep)
    return kept.rstrip("\n") + "\n" if markdown and kept != text else kept
