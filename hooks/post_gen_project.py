"""Cookiecutter post-generation hook: fills the new project with the template's own files.

Cookiecutter has rendered the stub folder into the new project directory (this process's working
directory); hooks/project_generator.py does the rest (read its docstring). An invalid answer
exits with status 1 after one message; cookiecutter then deletes the half-made directory.
Never asks anything: hooks also run under `--no-input`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The answers as JSON, written in by cookiecutter when it renders this file: the only Jinja in
# the hooks. Values that are neither text nor yes/no (cruft's commit objects, the prompts) as text.
ANSWERS_JSON = r"""{
{%- for key, value in cookiecutter.items() %}
  {{ key | tojson }}: {{ (value if value is boolean or value is string else value | string) | tojson }}{{ "," if not loop.last }}
{%- endfor %}
}"""


def _is_template(path: Path | None) -> bool:
    return path is not None and (path / "hooks" / "project_generator.py").is_file()


def _parent_cwd() -> Path | None:
    """Cookiecutter and cruft run hooks from inside the template checkout (their cwd), and it
    is absolute there; Linux shows it in /proc."""
    link = Path(f"/proc/{os.getppid()}/cwd")
    try:
        return Path(os.readlink(link))
    except OSError:
        return None


def template_checkout(answers: dict, scratch: Path) -> Path:
    """Find the template's files.

    Cookiecutter (>= 2.2) passes its checkout as `_repo_dir`, relative when the user typed a
    relative path (relative to where cookiecutter started, not to this hook's cwd). cruft passes
    only `_template` (where the template comes from) and `_commit`; if the checkout cannot be
    found, that commit is cloned again into `scratch`.
    """
    repo_dir = answers.get("_repo_dir") or ""
    candidates = [Path(repo_dir)] if Path(repo_dir).is_absolute() else []
    candidates.append(_parent_cwd())
    if repo_dir and "PWD" in os.environ:  # the shell's cwd when cookiecutter was started
        candidates.append(Path(os.environ["PWD"]) / repo_dir)
    for candidate in candidates:
        if _is_template(candidate):
            return candidate.resolve()
    source, commit = answers.get("_template"), answers.get("_commit")
    if not source or repo_dir:
        sys.exit(f"Cannot find the template checkout ({repo_dir!r}): give its absolute path.")
    clone = scratch / "template"
    subprocess.run(["git", "clone", "--quiet", str(source), str(clone)], check=True)
    if commit:
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", str(commit)], check=True)
    return clone


def main() -> int:
    answers = json.loads(ANSWERS_JSON)
    project_dir = Path.cwd()
    scratch = Path(tempfile.mkdtemp(prefix="template-"))
    try:
        template = template_checkout(answers, scratch)
        sys.path.insert(0, str(template / "hooks"))
        import project_generator

        try:
            project_generator.generate(template, answers, project_dir)
        except project_generator.GenerationError as err:
            print(f"\nERROR: {err}\n", file=sys.stderr)
            return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"Created {project_dir} ({answers['project_name']}, package {answers['package_name']}). "
        f"Next: `cd {project_dir.name}`, `git init`, and README.md's Quickstart."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
