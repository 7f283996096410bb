"""Makes a new project from the template's own files: what `post_gen_project.py` runs.

The repository root is the project; there is no templated copy of the code. :func:`generate`

1. checks the answers (:func:`problems`: one line each, saying what to choose);
2. takes the files git would commit from the template folder (not a git checkout: every file
   `.gitignore` does not name), minus the template's own (:data:`TEMPLATE_ONLY`);
3. renames ``my_project``, ``my-project``, ``My Project`` and ``MY_PROJECT`` in paths and text,
   and wraps the imports a longer name pushes past ruff's line length, as ruff would;
4. writes the answers where they belong (:func:`_configure`) and the LICENSE, and drops the
   blocks between ``template-only:start`` and ``template-only:end`` lines.

Every edit of step 4 must match exactly once: a file reshaped so that an edit no longer applies
stops generation, instead of silently keeping the template's value.

Standard library only, Python 3.10: it runs in cookiecutter's Python, which has none of the
project's dependencies.
"""

from __future__ import annotations

import datetime
import fnmatch
import itertools
import json
import keyword
import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# The template's own files (a folder ends with "/"): never copied into a project.
TEMPLATE_ONLY = (
    "cookiecutter.json",
    "hooks/",
    "{{cookiecutter.project_slug}}/",
    "tests/template/",
    "docs/template.md",
)
CI_WORKFLOW = ".github/workflows/ci.yml"
DEFAULT_NAMES = ("my_project", "my-project", "My Project", "MY_PROJECT")
# Lines only the template has: from a comment line `template-only:start` (Markdown's `<!-- -->`
# or a `#` comment) to one `template-only:end`, and a blank line after.
TEMPLATE_BLOCK = re.compile(
    r"^[ \t]*(?:<!--|#)[ \t]*template-only:start\b.*?\n"
    r".*?^[ \t]*(?:<!--|#)[ \t]*template-only:end\b.*?\n(?:[ \t]*\n)?",
    re.MULTILINE | re.DOTALL,
)
# A one-line `from a.b import c, d` (no parentheses, no comment): what step 3 may wrap.
ONE_LINE_IMPORT = re.compile(r"^([ \t]*)from ([\w.]+) import ([\w ,]+?)[ \t]*$", re.MULTILINE)

LICENSE_NAMES = {"proprietary": "Proprietary"}  # pyproject's `license` text, if not the answer
LOGGER_GROUPS = {"wandb": "default", "tensorboard": "tensorboard", "csv": "csv"}  # train.yaml
# What the README says of each answer (its "**Defaults.**" paragraph and opening paragraph).
LOGGER_WORDS = {
    "wandb": "Logger `default`: Weights & Biases (offline by itself without a login) and CSV files.",
    "tensorboard": "Logger `tensorboard`: TensorBoard event files in each run directory "
    "(Weights & Biases with `logger=default`, CSV, MLflow: one override away).",
    "csv": "Logger `csv`: CSV files in each run directory (Weights & Biases with "
    "`logger=default`, TensorBoard, MLflow: one override away).",
}
LOGGING_CLAIM = {  # the opening paragraph's "... and <this>. The examples ..."
    "wandb": "Weights & Biases logging that goes offline by itself",
    "tensorboard": "TensorBoard logging (Weights & Biases one override away)",
    "csv": "CSV logging (Weights & Biases one override away)",
}
ACCELERATOR_WORDS = {
    "auto": "a GPU when there is one, else the CPU (`accelerator=auto`)",
    "cpu": "the CPU (`accelerator=cpu`)",
    "gpu": "CUDA GPUs (`accelerator=gpu`; on a machine without one, `make train ARGS=trainer=cpu`)",
    "mps": "Apple silicon's GPU (`accelerator=mps`; elsewhere, `make train ARGS=trainer=cpu`)",
}
STRATEGY_WORDS = {
    "auto": "strategy `auto` (Lightning's choice: DDP when there are several devices)",
    "ddp": "strategy `ddp` (one process per device)",
    "dp": "strategy `dp` (one process, each batch split across the GPUs)",
}
PRECISION_WORDS = {
    "32-true": "precision `32-true`",
    "16-mixed": "precision `16-mixed` (float16 autocast)",
    "bf16-mixed": "precision `bf16-mixed` (bfloat16 autocast)",
}
DEFAULTS_PARAGRAPH = r"^\*\*Defaults\.\*\* (?:.+\n)+"  # up to the next blank line
# The Quickstart's sample output: its wandb line is only printed under the `wandb` answer.
WANDB_OUTPUT_LINE = r"^()INFO: wandb: no credentials found; logging offline .*\n()"
# wandb's run id in the progress bar of the Quickstart's sample output (no other logger has one)
WANDB_VERSION = r"^(Epoch \d+: .*)v_num=\w+, (.*)$"
# A line of the README's Layout blocks: a path, its line count, what it holds.
LAYOUT_LINE = re.compile(r"^(?P<path>\S+)(?P<gap> +)(?P<count>\d+)(?P<rest>  .*\n?)$")

# The top-level module of an import, or of a config's `_target_`.
IMPORTED = re.compile(
    r"^\s*(?:import |from |_target_: )([A-Za-z_]\w*)(?=[.,\n]| as | import )", re.M
)


class GenerationError(Exception):
    """Answers that cannot make a working project (one line each), or a template file that an
    edit no longer fits."""


@dataclass(frozen=True)
class Entry:
    """One file of the project: its bytes and permission bits (keeps `.ci/run` executable)."""

    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Template:
    """What a generation needs from the template folder, read once."""

    files: dict[str, Entry]  # the project's files before renaming, by template path
    choices: dict[str, list[str]]  # the choice questions of cookiecutter.json
    licenses: dict[str, str]  # license texts by choice, with {year} and {holder}
    reserved: frozenset[str]  # top-level modules a package name would shadow
    distributions: frozenset[str] = frozenset()  # the lock's, normalized: a slug that is one


# ---------------------------------------------------------------------------------------------
# Reading the template


def is_template_only(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in TEMPLATE_ONLY)


def _git_listing(root: Path) -> list[str]:
    """What git would commit from `root` (tracked, and untracked but not ignored); [] when
    `root` is not in a git checkout."""
    listing = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *listing], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [p for p in out.decode().split("\0") if p]


def _walk_listing(root: Path) -> list[str]:
    """Every file but those `.gitignore` names, for a template that is no git checkout (an
    unpacked zip). The root's kinds of pattern only: globs, a leading `/`, a trailing `/`."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.is_file() else []
    patterns = [line.strip() for line in lines if line.strip() and line[0] not in "#!"]

    def ignored(path: str, is_dir: bool) -> bool:
        for pattern in patterns:
            if pattern.endswith("/") and not is_dir:
                continue
            pattern = pattern.rstrip("/")
            target = path if "/" in pattern else path.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(target, pattern.lstrip("/")):
                return True
        return False

    found = []
    for here, dirs, files in os.walk(root):
        rel = Path(here).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if d != ".git" and not ignored(prefix + d, True)]
        found += [prefix + f for f in files if not ignored(prefix + f, False)]
    return found


def project_paths(root: Path, output: Path | None = None) -> list[str]:
    """The template's files that make a project (before renaming), sorted.

    `output`, the folder being generated, is left out when it lies inside the template
    (`cookiecutter . -o out`): its files are untracked files of the checkout by then.
    """
    root = Path(root).resolve()
    skip = None
    if output is not None and Path(output).resolve().is_relative_to(root):
        skip = Path(output).resolve().relative_to(root).as_posix() + "/"
    listing = _git_listing(root) or _walk_listing(root)
    return sorted(
        p
        for p in set(listing)
        if not is_template_only(p) and not (skip and p.startswith(skip)) and (root / p).is_file()
    )


def read_template(root: Path, output: Path | None = None) -> Template:
    """Read the template folder once: the project's files, the questions, the license texts."""
    root = Path(root)
    files = {}
    for path in project_paths(root, output):
        full = root / path
        files[path] = Entry(full.read_bytes(), stat.S_IMODE(full.stat().st_mode))
    spec = read_spec(root)
    choices = {k: [str(v) for v in vals] for k, vals in spec.items() if isinstance(vals, list)}
    licenses = {
        name: (root / "hooks" / "licenses" / f"{name}.txt").read_text(encoding="utf-8")
        for name in choices["license"]
    }
    # A package must not shadow the standard library, a module the project imports (in code or
    # in a config's `_target_`), or its own top-level modules and folders (train.py, tests/).
    reserved = set(sys.stdlib_module_names) | {p.split("/")[0].removesuffix(".py") for p in files}
    for path, entry in files.items():
        if path.endswith((".py", ".yaml")):
            reserved.update(IMPORTED.findall(entry.data.decode("utf-8")))
    lock = files.get("requirements/lock.txt")
    locked = re.findall(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", lock.data.decode() if lock else "", re.M
    )
    distributions = frozenset(normalized(name) for name in locked)
    return Template(files, choices, licenses, frozenset(reserved - {"my_project"}), distributions)


def normalized(distribution: str) -> str:
    """A distribution's name as pip compares it (PEP 503): `Scikit_Learn` is `scikit-learn`."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


# ---------------------------------------------------------------------------------------------
# 1. Checking the answers


def as_bool(value: object) -> bool | None:
    """Cookiecutter gives a bool; replays and hand-edited .cruft.json may give text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return {"true": True, "yes": True, "y": True, "1": True}.get(
        text, {"false": False, "no": False, "n": False, "0": False}.get(text)
    )


# The longest project name, folder and package name: a generated project is tested with names
# of this length (tests/template); longer ones push its lines past its own line length.
MAX_NAME = 80


def problems(template: Template, answers: Mapping[str, object]) -> list[str]:
    """Everything wrong with the answers: one line each, saying what to choose instead."""
    a = {key: str(value).strip() for key, value in answers.items()}
    name, slug, package = (a.get(k, "") for k in ("project_name", "project_slug", "package_name"))
    found = []
    names = {"project_name": name, "project_slug": slug, "package_name": package}
    if long := {key: len(value) for key, value in names.items() if len(value) > MAX_NAME}:
        found.append(  # one line: the slug and package follow the name unless given
            f"{' and '.join(long)} {'is' if len(long) == 1 else 'are'} "
            f"{' and '.join(map(str, long.values()))} characters long: at most {MAX_NAME} fit "
            "the project's lines (longer ones break its own lint and tests); choose a shorter "
            f"name, e.g. {names[next(iter(long))][:MAX_NAME].strip(' -_')!r}."
        )
    if not any(c.isalnum() for c in name):
        found.append(
            f"project_name={name!r} has no letters or digits: give a title such as 'Acme Vision'."
        )
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug):
        found.append(
            f"project_slug={slug!r} is no folder name: use lowercase letters and digits joined "
            "by single hyphens, e.g. 'acme-vision'."
        )
    if not re.fullmatch(r"[a-z][a-z0-9_]*", package):
        found.append(
            f"package_name={package!r} is no Python package name (from the project name unless "
            "given): start with a lowercase letter, then lowercase letters, digits and "
            "underscores, e.g. 'acme_vision'."
        )
    elif keyword.iskeyword(package):
        found.append(
            f"package_name={package!r} is a Python keyword: choose another, e.g. '{package}_project'."
        )
    elif package in template.reserved:
        found.append(
            f"package_name={package!r} is already a top-level module (the standard library, a "
            f"dependency, or one of the project's own), which the package would shadow: choose "
            f"another, e.g. '{package}_project'."
        )
    if normalized(slug) in template.distributions:
        found.append(  # `pip install -e .` would replace that dependency with the project
            f"project_slug={slug!r} is the name of a package the project installs (pip would "
            f"uninstall it to install the project under its name): choose another, e.g. "
            f"'{slug}-project'."
        )
    for key in ("project_name", "description", "author_name", "author_email"):
        value = str(answers.get(key, ""))
        if any(ord(c) < 32 for c in value) or "{{" in value or "{%" in value:
            found.append(f"{key}={value!r} must be one line of plain text (no '{{{{' or '{{%').")
    email = a.get("author_email", "")
    if email and not re.fullmatch(r"[^@\s\"]+@[^@\s\"]+\.[^@\s\"]+", email):
        found.append(
            f"author_email={email!r} is no email address: use name@example.com, or nothing."
        )
    for key, allowed in template.choices.items():
        if a.get(key) not in allowed:
            found.append(
                f"{key}={a.get(key)!r} is not an option: choose one of {', '.join(allowed)}."
            )
    if as_bool(answers.get("ci_workflow", True)) is None:
        found.append(f"ci_workflow={a['ci_workflow']!r} is not yes or no: answer yes or no.")
    return found + _trainer_problems(a.get("accelerator"), a.get("devices", ""), a.get("strategy"))


def _trainer_problems(accelerator: str | None, devices: str, strategy: str | None) -> list[str]:
    """Trainer defaults that cannot run on any machine. Those that need hardware (gpu, mps, -1)
    are the project's to refuse at run time, naming `trainer=cpu`, where the hardware lacks."""
    if not (devices in ("auto", "-1") or re.fullmatch(r"[1-9][0-9]*", devices)):
        return [f"devices={devices!r} is no device count: give 1, 2, ..., -1 (every GPU) or auto."]
    if accelerator == "mps" and devices not in ("1", "auto", "-1"):
        return [f"accelerator=mps with devices={devices}: MPS is one device; choose devices=1."]
    if accelerator == "mps" and strategy == "ddp":
        return ["accelerator=mps with strategy=ddp: Lightning has no DDP on MPS; choose auto."]
    if accelerator == "cpu" and devices == "-1":
        return ["accelerator=cpu with devices=-1: -1 means every GPU; choose a number, e.g. 1."]
    return []


# ---------------------------------------------------------------------------------------------
# 3. Renaming and 4. configuring


def _edit(text: str, pattern: str, value: str, where: str) -> str:
    """Put `value` between the two groups of the one match of `pattern` (a multiline regex), or
    stop: the file changed shape and the answer would silently not land."""
    new, count = re.subn(pattern, lambda m: m.group(1) + value + m.group(2), text, flags=re.M)
    if count != 1:
        raise GenerationError(
            f"The template's {where} no longer has exactly one line matching {pattern!r} "
            f"({count} found): fix that file or hooks/project_generator.py."
        )
    return new


def _configure(path: str, text: str, answers: Mapping[str, str]) -> str:
    """Write the answers that belong in one file (by its template path) into its text."""
    if path == "pyproject.toml":
        author = f"name = {json.dumps(answers['author_name'], ensure_ascii=False)}"
        if answers["author_email"]:
            author += f", email = {json.dumps(answers['author_email'])}"
        license_name = LICENSE_NAMES.get(answers["license"], answers["license"])
        version = answers["python_version"]
        for key, value in (  # a JSON string is a TOML basic string
            ("description", json.dumps(answers["description"], ensure_ascii=False)),
            ("authors", f"[{{ {author} }}]"),
            ("license", f"{{ text = {json.dumps(license_name)} }}"),
            ("requires-python", f'">={version}"'),
            ("python_version", f'"{version}"'),  # mypy checks for the oldest Python
        ):
            text = _edit(text, rf"^({re.escape(key)} = ).*()$", value, path)
    elif path == "Makefile":  # `make lock` resolves for the oldest Python the project takes
        version = answers["python_version"]
        text = _edit(text, r"(--python-version )[0-9.]+( )", version, path)
    elif path == "configs/trainer/default.yaml":
        for key in ("accelerator", "devices", "strategy", "precision"):  # a trailing comment stays
            text = _edit(text, rf"^({key}:[ \t]*)[^#\n]*?([ \t]*(?:#.*)?)$", answers[key], path)
    elif path == "README.md":  # the sentences naming the answers, the presets table's `default`
        text = _edit(text, r"^(With Python )[0-9.]+( or newer)", answers["python_version"], path)
        claim = LOGGING_CLAIM[answers["logger"]]
        text = _edit(text, rf"^(and ){re.escape(LOGGING_CLAIM['wandb'])}(\. )", claim, path)
        text = _edit(text, rf"^(){DEFAULTS_PARAGRAPH}()", defaults_paragraph(answers), path)
        if answers["logger"] != "wandb":
            text = _edit(text, WANDB_OUTPUT_LINE, "", path)
            text = _edit(text, WANDB_VERSION, "", path)
        cells = [f"`{answers[k]}`" for k in ("accelerator", "strategy", "precision")]
        devices = {"-1": "all"}.get(answers["devices"], answers["devices"])
        if (*cells, devices) != ("`auto`", "`auto`", "`32-true`", "1"):
            row = f"{cells[0]} | {devices} | {cells[1]} | {cells[2]} | this project's defaults"
            text = _edit(text, r"^(\| `default` \| ).*( \|)$", row, path)
    elif path == "configs/train.yaml":
        group = LOGGER_GROUPS[answers["logger"]]
        text = _edit(text, r"^([ \t]*-[ \t]*logger:[ \t]*)[^\s#]+(.*)$", group, path)
    elif path == CI_WORKFLOW:
        version = f'"{answers["python_version"]}"'
        text = _edit(text, r'^([ \t]*python-version:[ \t]*)"[0-9.]+"(.*)$', version, path)
    kept = TEMPLATE_BLOCK.sub("", text)
    if kept != text and path.endswith(".md"):  # a block at the end leaves its blank line before it
        kept = kept.rstrip("\n") + "\n"
    return kept


def defaults_paragraph(answers: Mapping[str, str]) -> str:
    """The README's "**Defaults.**" paragraph: the answers the project was generated with."""
    devices = answers["devices"]
    devices = {"1": "1 device", "-1": "every GPU (`devices=-1`)", "auto": "`devices=auto`"}.get(
        devices, f"{devices} devices"
    )
    text = (
        f"**Defaults.** Python {answers['python_version']} or newer. "
        f"{LOGGER_WORDS[answers['logger']]} Trainer: {ACCELERATOR_WORDS[answers['accelerator']]}, "
        f"{devices}, {STRATEGY_WORDS[answers['strategy']]}, "
        f"{PRECISION_WORDS[answers['precision']]}. Each is a config value (`configs/train.yaml`, "
        "`configs/trainer/default.yaml`) that a run can override: "
        f"`python train.py logger={'tensorboard' if answers['logger'] == 'csv' else 'csv'} "
        "trainer=cpu`."
    )
    # wrapped at 96 columns as the README is, never inside a `code span`
    kept = re.sub(r"`[^`]*`", lambda m: m.group().replace(" ", "\0"), text)
    wrapped = textwrap.fill(kept, width=96, break_long_words=False, break_on_hyphens=False)
    return wrapped.replace("\0", " ") + "\n"


def _layout_aligned(text: str, renamed: Callable[[str], str]) -> str:
    """The README's Layout blocks (``path  lines  what``, the line counts right-aligned) with
    their counts aligned again for the paths as ``renamed`` will write them: a longer package
    name pushes its paths' counts out of the column."""
    out: list[str] = []
    lines = text.splitlines(keepends=True)
    for is_layout, group in itertools.groupby(
        lines, key=lambda line: bool(LAYOUT_LINE.match(line))
    ):
        block = list(group)
        rows = [row for line in block if (row := LAYOUT_LINE.match(line))]
        if not is_layout or len(rows) < 2:
            out += block
            continue
        gap = min(len(row["gap"]) for row in rows)  # the block's narrowest gap stays
        end = max(
            *(len(row["path"]) + len(row["gap"]) + len(row["count"]) for row in rows),
            *(len(renamed(row["path"])) + gap + len(row["count"]) for row in rows),
        )
        for row in rows:
            spaces = " " * (end - len(renamed(row["path"])) - len(row["count"]))
            out.append(f"{row['path']}{spaces}{row['count']}{row['rest']}")
    return "".join(out)


def _wrap_long_imports(text: str, line_length: int) -> str:
    """`from pkg.mod import a, b` past the line length, as ruff's isort and formatter wrap it:
    one name a line, a trailing comma. A longer package name than the template's pushes
    imports past the limit, and the generator cannot run ruff (it need not be installed)."""

    def wrap(match: re.Match[str]) -> str:
        if len(match.group(0)) <= line_length:
            return match.group(0)
        indent, module, names = match.groups()
        lines = "".join(f"{indent}    {n.strip()},\n" for n in names.split(","))
        return f"{indent}from {module} import (\n{lines}{indent})"

    return ONE_LINE_IMPORT.sub(wrap, text)


def render(template: Template, answers: Mapping[str, object]) -> dict[str, Entry]:
    """The new project's files by path, in memory. Raises GenerationError on bad answers."""
    found = problems(template, answers)
    if found:
        raise GenerationError("\n".join(found))
    a = {key: str(value).strip() for key, value in answers.items()}
    package = a["package_name"]
    names = {
        "my_project": package,
        "my-project": a["project_slug"],
        "My Project": a["project_name"],
        "MY_PROJECT": package.upper(),
    }
    rename = re.compile("|".join(map(re.escape, DEFAULT_NAMES)))

    def renamed(text: str) -> str:
        return rename.sub(lambda m: names[m.group()], text)

    pyproject = template.files["pyproject.toml"].data.decode()
    line_length = int(re.search(r"^line-length = (\d+)", pyproject, re.M).group(1))
    out: dict[str, Entry] = {}
    for path, entry in template.files.items():
        if path == CI_WORKFLOW and not as_bool(answers.get("ci_workflow", True)):
            continue
        data = entry.data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None  # binary: copied as is
        if text is not None:
            text = _configure(path, text, a)
            if path == "README.md":
                text = _layout_aligned(text, renamed)
            text = renamed(text)
            if path.endswith((".py", ".md")):  # ruff formats Markdown's Python blocks too
                text = _wrap_long_imports(text, line_length)
            data = text.encode("utf-8")
        out[renamed(path)] = Entry(data, entry.mode)
    year = a.get("__year") or str(datetime.date.today().year)
    license_text = template.licenses[a["license"]].replace("{year}", year)
    out["LICENSE"] = Entry(license_text.replace("{holder}", a["author_name"]).encode("utf-8"))
    return out


def write(files: Mapping[str, Entry], project_dir: Path) -> None:
    for path, entry in sorted(files.items()):
        target = Path(project_dir) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(entry.data)
        target.chmod(entry.mode)


def next_steps(answers: Mapping[str, object], project_dir: Path, shell_dir: str | None) -> str:
    """What generation prints last: the project and the commands that start it. `shell_dir`,
    the folder cookiecutter was started in (the shell's PWD), makes the `cd` relative."""
    a = {key: str(value).strip() for key, value in answers.items()}
    folder = Path(project_dir).resolve()
    where = str(folder)
    if shell_dir and folder.is_relative_to(Path(shell_dir).resolve()):
        where = folder.relative_to(Path(shell_dir).resolve()).as_posix()
    trainer = ", ".join(f"{key}={a[key]}" for key in ("accelerator", "devices", "strategy"))
    lines = [
        f"Created {a['project_name']} in {folder}: Python >={a['python_version']}, "
        f"logger {a['logger']}, {trainer}, precision={a['precision']}.",
        "Next:",
        f"  cd {where}",
        '  git init && git add -A && git commit -m "Generated"',
        "  make train    # the first call installs .venv (torch, the lock: a few minutes), then trains",
        "  make test     # the tests CI runs",
    ]
    if a["accelerator"] in ("gpu", "mps"):
        lines.insert(-1, "  make train ARGS=trainer=cpu    # on a machine without that GPU")
    return "\n".join(lines)


# cookiecutter's abbreviations (its `abbreviations` setting's defaults), as cruft needs a URL
ABBREVIATIONS = {
    "gh": "https://github.com/{}.git",
    "gl": "https://gitlab.com/{}.git",
    "bb": "https://bitbucket.org/{}",
}


def cruft_state(template_root: Path, answers: Mapping[str, object]) -> dict[str, object] | None:
    """What cruft records of a project it creates (`.cruft.json`), for one cookiecutter made:
    so `make update` (`cruft update`) works in every project made from a git template.

    None where cruft made the project (it writes its own: its context has `_commit`) or where
    the template is no git checkout (a zip): there is no commit to update from.
    """
    if "_commit" in answers:
        return None
    try:
        top, commit = (
            subprocess.run(
                ["git", "-C", str(template_root), "rev-parse", *args],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            for args in (["--show-toplevel"], ["HEAD"])
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    template = str(answers.get("_template") or top).removeprefix("git+")  # cookiecutter's "git+"
    prefix, _, rest = template.partition(":")
    if prefix in ABBREVIATIONS and rest and not rest.startswith("//"):
        template = ABBREVIATIONS[prefix].format(rest)
    elif "://" not in template and not template.startswith("git@"):
        template = top  # a local checkout: its absolute path, however it was given
    directory = Path(template_root).resolve().relative_to(Path(top).resolve()).as_posix()
    spec_keys = set(read_spec(template_root)) - {"__prompts__"}
    context = {k: v for k, v in answers.items() if k in spec_keys}
    context.update({"_template": template, "_commit": commit})
    return {
        "template": template,
        "commit": commit,
        "checkout": None if str(answers.get("_checkout")) in ("None", "") else answers["_checkout"],
        "context": {"cookiecutter": context},
        "directory": None if directory == "." else directory,
    }


def read_spec(template_root: Path) -> dict[str, object]:
    return json.loads((Path(template_root) / "cookiecutter.json").read_text(encoding="utf-8"))


def generate(template_root: Path, answers: Mapping[str, object], project_dir: Path) -> list[str]:
    """Fill `project_dir` with the project (its README replaces the stub's) and, for a git
    template, its `.cruft.json`; return the project's paths (without `.cruft.json`)."""
    files = render(read_template(template_root, output=project_dir), answers)
    write(files, Path(project_dir))
    state = cruft_state(template_root, answers)
    if state is not None:
        (Path(project_dir) / ".cruft.json").write_text(json.dumps(state, indent=2) + "\n")
    return sorted(files)
