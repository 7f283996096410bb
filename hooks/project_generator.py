"""Builds a new project from this repository's own files: the engine behind `cookiecutter`.

The repository root is the only copy of the code; there is no templated code tree. Cookiecutter
renders the stub folder ``{{cookiecutter.project_slug}}/`` (one README) and then runs
``hooks/post_gen_project.py``, which calls :func:`generate` to fill the new folder:

1. **Collect** every file of the template checkout as git sees it (tracked, plus untracked
   files that are not ignored; without git: a walk honouring the root ``.gitignore``), minus the
   template's own files (:data:`TEMPLATE_ONLY`). Files added to the root later are picked up
   with no change here.
2. **Rename** by plain text replacement, in paths and contents: ``my_project`` -> package,
   ``my-project`` -> slug, ``My Project`` -> project name, ``MY_PROJECT`` -> PACKAGE.
3. **Configure** from the answers: pyproject.toml metadata, the trainer defaults in
   ``configs/trainer/default.yaml``, the logger in ``configs/train.yaml``, the CI Python,
   the LICENSE text; README blocks between ``<!-- template-only:start -->`` and
   ``<!-- template-only:end -->`` lines are dropped, and the CI workflow when not wanted.

Every edit must match exactly once: a file reshaped so that an edit no longer applies stops
generation with a message, instead of silently keeping the template's value.

Standard library only: hooks run in cookiecutter's Python, which need not have torch or any of
the project's dependencies (or even ``tomllib``: Python 3.10).
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import keyword
import os
import re
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Paths (relative to the template root, "/" separated) that make up the template itself and are
# never copied into a project. A folder is given with a trailing "/".
TEMPLATE_ONLY = (
    "cookiecutter.json",
    "hooks/",
    "{{cookiecutter.project_slug}}/",
    "tests/template/",
)
STUB_DIR = "{{cookiecutter.project_slug}}"
CI_WORKFLOW = ".github/workflows/ci.yml"
LICENSE_FILE = "LICENSE"

# The template's own names, as they appear in the root's files.
DEFAULT_NAMES = ("my_project", "my-project", "My Project", "MY_PROJECT")

README_BLOCK = re.compile(
    r"^<!-- template-only:start -->[ \t]*\n.*?^<!-- template-only:end -->[ \t]*\n(?:[ \t]*\n)?",
    re.MULTILINE | re.DOTALL,
)

# pyproject's `license` text per choice of the `license` question.
LICENSE_NAMES = {
    "MIT": "MIT",
    "Apache-2.0": "Apache-2.0",
    "BSD-3-Clause": "BSD-3-Clause",
    "proprietary": "Proprietary",
}
# The `logger` answer -> the option of the Hydra `logger` group that train.yaml selects.
# wandb keeps the root's `default` group: CSV (always readable) plus wandb.
LOGGER_GROUPS = {"wandb": "default", "tensorboard": "tensorboard", "csv": "csv"}

# Top-level modules a package must not shadow, besides the standard library, the project's own
# root modules (train.py, tests/, ...) and the distributions named in pyproject.toml.
KNOWN_MODULES = frozenset(
    [
        "torch",
        "torchvision",
        "torchaudio",
        "lightning",
        "pytorch_lightning",
        "lightning_fabric",
        "lightning_utilities",
        "torchmetrics",
        "hydra",
        "hydra_plugins",
        "omegaconf",
        "rich",
        "wandb",
        "tensorboard",
        "sklearn",
        "matplotlib",
        "numpy",
        "scipy",
        "pandas",
        "yaml",
        "pytest",
        "ruff",
        "mypy",
        "hatchling",
        "optuna",
        "transformers",
        "datasets",
        "tensorflow",
        "keras",
        "jax",
        "src",
        "configs",
    ]
)
# Distribution names whose import name differs (normalised: lowercase, "-"/"." -> "_").
IMPORT_NAMES = {
    "hydra_core": "hydra",
    "scikit_learn": "sklearn",
    "pyyaml": "yaml",
    "hydra_optuna_sweeper": "hydra_plugins",
    "hydra_submitit_launcher": "hydra_plugins",
}


class GenerationError(Exception):
    """An answer that cannot make a working project, or a template file an edit no longer fits."""


@dataclass(frozen=True)
class Entry:
    """One file of the project: its bytes and permission bits (keeps `.ci/run` executable)."""

    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Template:
    """What a generation needs from the template checkout, read once."""

    root: Path
    files: dict[str, Entry]  # the project's files before renaming, by template path
    choices: dict[str, list[str]]  # the choice questions of cookiecutter.json
    licenses: dict[str, str]  # license texts by choice, with {year} and {holder}
    reserved: frozenset[str]  # package names that would shadow another module


# ---------------------------------------------------------------------------------------------
# 1. Collect


def is_template_only(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in TEMPLATE_ONLY)


def _git_listing(root: Path) -> list[str] | None:
    """Files git would commit from `root` (tracked + untracked-not-ignored), or None without git."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if Path(top).resolve() != root.resolve():
            return None  # root is a plain folder inside some other repository
        out = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted({p for p in out.decode().split("\0") if p})


def _ignore_patterns(root: Path) -> list[str]:
    gitignore = root / ".gitignore"
    if not gitignore.is_file():
        return []
    lines = (line.strip() for line in gitignore.read_text().splitlines())
    return [line for line in lines if line and not line.startswith(("#", "!"))]


def _ignored(path: str, is_dir: bool, patterns: list[str]) -> bool:
    """The subset of .gitignore rules the root uses: globs, `/` anchors, trailing `/` for dirs.

    Only for a template that is not a git checkout (e.g. a downloaded zip); negations are not
    supported.
    """
    name = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        if pattern.endswith("/"):
            if not is_dir:
                continue
            pattern = pattern[:-1]
        if "/" in pattern:
            if fnmatch.fnmatchcase(path, pattern.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def _walk_listing(root: Path) -> list[str]:
    patterns = _ignore_patterns(root)
    found = []
    for here, dirs, files in os.walk(root):
        rel = Path(here).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = sorted(
            d for d in dirs if d != ".git" and not _ignored(prefix + d, True, patterns)
        )
        found += [prefix + f for f in files if not _ignored(prefix + f, False, patterns)]
    return sorted(found)


def project_paths(root: Path, output: Path | None = None) -> list[str]:
    """The template-root files that a project is made of (before renaming).

    `output`, the folder being generated, is left out when it lies inside the template
    (`cookiecutter . -o out`): its files are untracked files of the checkout by then.
    """
    listing = _git_listing(root)
    if listing is None:
        listing = _walk_listing(root)
    skip = ""
    if output is not None and Path(output).resolve().is_relative_to(root.resolve()):
        skip = Path(output).resolve().relative_to(root.resolve()).as_posix() + "/"
    return [
        p
        for p in listing
        if not is_template_only(p) and not (skip and p.startswith(skip)) and (root / p).is_file()
    ]


def _dependency_names(pyproject: str) -> set[str]:
    """Import names of the requirements in `dependencies` and `[project.optional-dependencies]`
    (one requirement per line, as this pyproject writes them; tomllib is not in Python 3.10)."""
    names: set[str] = set()
    in_optional = in_list = False
    for line in pyproject.splitlines():
        if line.startswith("["):
            in_optional, in_list = line.strip() == "[project.optional-dependencies]", False
            continue
        if re.match(r"dependencies\s*=\s*\[", line) or (
            in_optional and re.match(r"[\w-]+\s*=\s*\[", line)
        ):
            in_list = True
            line = line.split("[", 1)[1]
        if in_list:
            for name in re.findall(r'"([A-Za-z0-9][A-Za-z0-9._-]*)', line.split("#")[0]):
                norm = re.sub(r"[-.]", "_", name.lower())
                names.add(IMPORT_NAMES.get(norm, norm))
            in_list = "]" not in line
    return names


def _reserved_names(root: Path, paths: list[str]) -> frozenset[str]:
    """Top-level module names a new package must not take: it would shadow (or be shadowed by)
    the standard library, a dependency, or one of the project's own root modules."""
    roots = {p[:-3] for p in paths if "/" not in p and p.endswith(".py")}
    roots |= {p.split("/")[0] for p in paths if p.count("/") == 1 and p.endswith("/__init__.py")}
    pyproject = root / "pyproject.toml"
    deps = _dependency_names(pyproject.read_text()) if pyproject.is_file() else set()
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    return frozenset(stdlib | KNOWN_MODULES | roots | deps)


def read_template(root: Path, output: Path | None = None) -> Template:
    """Read the template checkout once: project files, questions, license texts."""
    root = Path(root)
    paths = project_paths(root, output)
    files = {}
    for path in paths:
        full = root / path
        files[path] = Entry(full.read_bytes(), stat.S_IMODE(full.stat().st_mode))
    spec = json.loads((root / "cookiecutter.json").read_text())
    choices = {k: [str(v) for v in vals] for k, vals in spec.items() if isinstance(vals, list)}
    licenses = {
        name: (root / "hooks" / "licenses" / f"{name}.txt").read_text()
        for name in choices["license"]
    }
    return Template(root, files, choices, licenses, _reserved_names(root, paths))


# ---------------------------------------------------------------------------------------------
# Validation


def as_bool(value: object) -> bool:
    """Cookiecutter gives booleans; replays and hand-edited .cruft.json may give strings."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "t", "yes", "y", "on"):
        return True
    if text in ("0", "false", "f", "no", "n", "off"):
        return False
    raise GenerationError(f"ci_workflow={value!r} is not a yes/no answer: use yes or no.")


def problems(template: Template, answers: Mapping[str, object]) -> list[str]:
    """Everything wrong with the answers, one sentence each saying what would be accepted."""
    found = []
    name = str(answers.get("project_name", ""))
    slug = str(answers.get("project_slug", ""))
    package = str(answers.get("package_name", ""))
    if not name.strip() or not any(c.isalnum() for c in name):
        found.append(
            f"project_name={name!r} has no letters or digits: give a title such as 'Acme Vision'."
        )
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug):
        found.append(
            f"project_slug={slug!r} (derived from project_name={name!r} unless given) is not a "
            "valid folder and distribution name: use lowercase letters and digits separated by "
            "single hyphens, e.g. 'acme-vision'."
        )
    if not re.fullmatch(r"[a-z][a-z0-9_]*", package):
        found.append(
            f"package_name={package!r} (derived from the project name unless given) is not a "
            "valid Python package name: it must start with a lowercase letter and hold only "
            "lowercase letters, digits and underscores, e.g. 'acme_vision'. Choose a project_name "
            "that starts with a letter, or pass package_name=... explicitly."
        )
    elif keyword.iskeyword(package):
        found.append(
            f"package_name={package!r} is a Python keyword (`import {package}` is a syntax "
            f"error): choose another name, e.g. '{package}_project'."
        )
    elif package in template.reserved:
        found.append(
            f"package_name={package!r} is already a top-level module (the standard library, a "
            "dependency such as torch or lightning, or one of this project's own modules), "
            f"which the package would shadow: choose another name, e.g. '{package}_project'."
        )
    for key in ("project_name", "description", "author_name", "author_email"):
        value = str(answers.get(key, ""))
        if any(ord(c) < 32 for c in value) or "{{" in value or "{%" in value:
            found.append(
                f"{key}={value!r} must be one line of plain text (no control characters, no "
                "'{{' or '{%')."
            )
    email = str(answers.get("author_email", ""))
    if email and not re.fullmatch(r"[^@\s\"]+@[^@\s\"]+\.[^@\s\"]+", email):
        found.append(
            f"author_email={email!r} is not an email address: use name@example.com, or leave it empty."
        )
    for key, allowed in template.choices.items():
        value = str(answers.get(key, ""))
        if value not in allowed:
            found.append(f"{key}={value!r} is not an option: choose one of {', '.join(allowed)}.")
    devices = str(answers.get("devices", "")).strip()
    if not (devices in ("auto", "-1") or re.fullmatch(r"[1-9][0-9]*", devices)):
        found.append(
            f"devices={devices!r} is not a device count: use a positive whole number (e.g. 1 or "
            "2), -1 for all devices, or auto."
        )
    try:
        as_bool(answers.get("ci_workflow", True))
    except GenerationError as err:
        found.append(str(err))
    return found


# ---------------------------------------------------------------------------------------------
# 2. Rename and 3. configure


def _toml_string(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes).
    return json.dumps(value, ensure_ascii=False)


def _edit(text: str, pattern: str, value: str, where: str) -> str:
    """Put `value` between the two groups of the one match of `pattern` (a multiline regex),
    or stop: the file changed shape and the answer would silently not land."""
    new, count = re.subn(pattern, lambda m: m.group(1) + value + m.group(2), text, flags=re.M)
    if count != 1:
        raise GenerationError(
            f"The template's {where} no longer has exactly one line matching {pattern!r} "
            f"({count} found), so the answer cannot be written there. Fix that file or "
            "hooks/project_generator.py and generate again."
        )
    return new


def _configure(path: str, text: str, answers: Mapping[str, str]) -> str:
    """Write the answers that belong in one file (by its template path) into its text."""
    if path == "pyproject.toml":
        author = f"name = {_toml_string(answers['author_name'])}"
        if answers["author_email"]:
            author += f", email = {_toml_string(answers['author_email'])}"
        version = answers["python_version"]
        license_name = _toml_string(LICENSE_NAMES[answers["license"]])
        for key, value in (
            ("description", _toml_string(answers["description"])),
            ("authors", f"[{{ {author} }}]"),
            ("license", f"{{ text = {license_name} }}"),
            ("requires-python", _toml_string(f">={version}")),
            # mypy checks for the oldest supported Python. Ruff's target-version stays: the code
            # is written for 3.10, and a newer target asks for newer syntax (UP rules).
            ("python_version", _toml_string(version)),
        ):
            text = _edit(text, rf"^({re.escape(key)} = ).*()$", value, path)
    elif path == "configs/trainer/default.yaml":
        for key in ("accelerator", "devices", "strategy", "precision"):
            # a top-level `key: value` line; a trailing comment stays
            value = answers[key].strip()
            text = _edit(text, rf"^({key}:[ \t]*)[^#\n]*?([ \t]*(?:#.*)?)$", value, path)
    elif path == "configs/train.yaml":
        group = LOGGER_GROUPS[answers["logger"]]
        text = _edit(text, r"^([ \t]*-[ \t]*logger:[ \t]*)[^\s#]+(.*)$", group, path)
    elif path == CI_WORKFLOW:
        version = answers["python_version"]
        text = _edit(text, r'^([ \t]*python-version:[ \t]*)"[0-9.]+"(.*)$', f'"{version}"', path)
    if path.endswith(".md"):
        kept = README_BLOCK.sub("", text)
        if kept != text:  # a block at the end leaves its blank line before it
            text = kept.rstrip("\n") + "\n"
    return text


def render(template: Template, answers: Mapping[str, object]) -> dict[str, Entry]:
    """The new project's files by path, in memory. Raises GenerationError on a bad answer."""
    found = problems(template, answers)
    if found:
        raise GenerationError(
            "Cannot generate the project:\n  - "
            + "\n  - ".join(found)
            + "\nNo project was generated."
        )
    text_answers = {k: str(v) for k, v in answers.items()}
    year = text_answers.get("__year") or str(datetime.date.today().year)
    package = text_answers["package_name"]
    names = {
        "my_project": package,
        "my-project": text_answers["project_slug"],
        "My Project": text_answers["project_name"],
        "MY_PROJECT": package.upper(),
    }
    rename = re.compile("|".join(map(re.escape, DEFAULT_NAMES)))

    def renamed(text: str) -> str:
        if not any(name in text for name in DEFAULT_NAMES):  # most files: a quick no
            return text
        return rename.sub(lambda m: names[m.group()], text)

    with_ci = as_bool(answers.get("ci_workflow", True))
    out: dict[str, Entry] = {}
    for path, entry in template.files.items():
        if path == CI_WORKFLOW and not with_ci:
            continue
        data = entry.data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None  # binary: copied as is
        if text is not None:
            text = _configure(path, text, text_answers)
            data = renamed(text).encode("utf-8")
        out[renamed(path)] = Entry(data, entry.mode)
    license_text = template.licenses[text_answers["license"]]
    license_text = license_text.replace("{year}", year).replace(
        "{holder}", text_answers["author_name"]
    )
    out[LICENSE_FILE] = Entry(license_text.encode("utf-8"))
    return out


def write(files: Mapping[str, Entry], project_dir: Path) -> None:
    for path, entry in sorted(files.items()):
        target = project_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(entry.data)
        target.chmod(entry.mode)


def generate(template_root: Path, answers: Mapping[str, object], project_dir: Path) -> list[str]:
    """Fill `project_dir` (cookiecutter's rendered stub) with the project; returns its paths."""
    template = read_template(template_root, output=project_dir)
    files = render(template, answers)
    # The stub's own files (its README) are placeholders: the project's files replace them.
    stub = Path(template_root) / STUB_DIR
    for placeholder in stub.rglob("*"):
        rel = placeholder.relative_to(stub).as_posix()
        if placeholder.is_file() and rel not in files:
            (project_dir / rel).unlink(missing_ok=True)
    write(files, Path(project_dir))
    return sorted(files)
