"""Generation: a covering set of answers, the root as its own --no-input generation, answers
landing in the configs, and cookiecutter writing what the generator renders."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from cookiecutter.main import cookiecutter
from hydra import compose, initialize_config_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip's vendored copy of the same parser
    from pip._vendor import tomli as tomllib

from .conftest import ROOT, run_cookiecutter_cli, snapshot_repo, subprocess_env
from .expected import (
    CHOICES,
    CI_WORKFLOW,
    DEFAULT_NAME,
    DEFAULTS,
    expected_paths,
    root_files,
    without_template_blocks,
)

LONG_NAME = "Acme Vision Research Laboratory For Very Long Names Of Deep Learning Projects X1"
# (project name, slug, package): from one letter to 80 characters, one package name given.
NAMES = [
    ("Acme Vision", "acme-vision", "acme_vision"),
    ("Café Vision 2", "cafe-vision-2", "cafe_vision_2"),
    ("X", "x", "x"),
    ("Deep Sea Survey", "deep-sea-survey", "sea_survey"),
    (LONG_NAME, LONG_NAME.lower().replace(" ", "-"), LONG_NAME.lower().replace(" ", "_")),
]
AUTHORS = [("Ann O'Neil", "ann@example.org"), ('Bo "B" Li', ""), ("Ünal Çelik", "u@x.io")]
# Every question of the covering set, and the values it takes.
QUESTIONS = {
    **{key: CHOICES[key] for key in ("accelerator", "strategy", "precision")},
    "devices": ["1", "2", "auto", "-1"],
    **{key: CHOICES[key] for key in ("license", "python_version", "logger")},
    "ci_workflow": [True, False],
    "name": list(range(len(NAMES))),
    "author": list(range(len(AUTHORS))),
}
TRAINER = ("accelerator", "strategy", "precision", "devices")
LICENSE_HEADS = {
    "MIT": "MIT License\n\nCopyright (c) {year} {holder}\n",
    "Apache-2.0": "\n                                 Apache License\n",
    "BSD-3-Clause": "BSD 3-Clause License\n\nCopyright (c) {year}, {holder}\n",
    "proprietary": "Copyright (c) {year} {holder}. All rights reserved.\n",
}
PYPROJECT_LICENSE = {"proprietary": "Proprietary"}
DEFAULT_NAMES = ("my_project", "my-project", "my project")  # any case, as DEFAULT_NAME
LOGGER_GROUP = {"wandb": "default", "tensorboard": "tensorboard", "csv": "csv"}
LOGGER_NAMES = {"wandb": "Weights & Biases", "tensorboard": "TensorBoard", "csv": "CSV"}


def pairs_of(row: dict[str, object]) -> set[frozenset]:
    """The pairs of answers (of two questions) that one row of answers holds."""
    return {frozenset([(k1, row[k1]), (k2, row[k2])]) for k1, k2 in itertools.combinations(row, 2)}


def covering_set() -> list[dict[str, object]]:
    """Every accelerator x strategy x precision x devices, the other answers picked (greedily)
    so that every pair of values of any two questions is in some project that generates."""
    missing = _every_pair() - {p for p in _every_pair() if never_runs(dict(p), partial=True)}

    def fill(row: dict[str, object]) -> dict[str, object]:
        for key in QUESTIONS:
            if key not in row:
                runnable = [v for v in QUESTIONS[key] if not never_runs({**row, key: v}, True)]
                row[key] = max(
                    runnable or QUESTIONS[key],
                    key=lambda v: sum(frozenset([(key, v), (k, row[k])]) in missing for k in row),
                )
        if not never_runs(row):
            missing.difference_update(pairs_of(row))
        return row

    trainer = itertools.product(*(QUESTIONS[key] for key in TRAINER))
    rows = [fill(dict(zip(TRAINER, combo, strict=True))) for combo in trainer]
    while missing:
        rows.append(fill(dict(min(missing, key=lambda pair: sorted(map(repr, pair))))))
    return rows


def _every_pair() -> set[frozenset]:
    return {
        frozenset([(k1, v1), (k2, v2)])
        for k1, k2 in itertools.combinations(QUESTIONS, 2)
        for v1 in QUESTIONS[k1]
        for v2 in QUESTIONS[k2]
    }


def answers_for(row: dict[str, object]) -> dict[str, object]:
    name, slug, package = NAMES[int(row["name"])]  # type: ignore[call-overload]
    author, email = AUTHORS[int(row["author"])]  # type: ignore[call-overload]
    return {
        **DEFAULTS,
        **{key: value for key, value in row.items() if key not in ("name", "author")},
        "project_name": name,
        "project_slug": slug,
        "package_name": package,
        "author_name": author,
        "author_email": email,
        "description": f'Project "{name}" \\ with a backslash',
        "__year": "2031",
    }


def never_runs(answers: dict[str, object], partial: bool = False) -> bool:
    """Trainer defaults no machine can run: more than one MPS device, DDP on MPS, -1 CPUs.
    `partial`: answers not given yet are ones that run anywhere."""
    if partial:
        answers = {"accelerator": "auto", "strategy": "auto", "devices": "1", **answers}
    accelerator, devices = answers["accelerator"], answers["devices"]
    if accelerator == "mps":
        return devices not in ("1", "auto", "-1") or answers["strategy"] == "ddp"
    return accelerator == "cpu" and devices == "-1"


@functools.lru_cache(maxsize=1024)
def parse_toml(text: str) -> dict:
    return tomllib.loads(text)


def check_project(files: dict[str, object], answers: dict[str, object]) -> None:
    """The exact file set, nothing unrendered or left of the template's names or of the
    template's own tooling, the answers in place."""
    assert set(files) == expected_paths(answers)  # cached per names: a set of ~150 paths
    texts = {}
    for path, entry in files.items():
        try:
            texts[path] = entry.data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    everything = "\0".join(texts.values())
    lowered = everything.lower()
    if "{{" in everything or "{%" in everything or any(n in lowered for n in DEFAULT_NAMES):
        for path, text in texts.items():
            assert "{{" not in text and "{%" not in text, f"template syntax left in {path}"
            assert not DEFAULT_NAME.search(text), f"{DEFAULT_NAME.search(text)} left in {path}"
    assert "template-only" not in everything and "tests/template" not in everything
    trainer = texts["configs/trainer/default.yaml"]
    for key in TRAINER:
        assert re.search(rf"^{key}: {re.escape(str(answers[key]))}$", trainer, re.M), key
    group = LOGGER_GROUP[str(answers["logger"])]
    assert re.search(rf"^  - logger: {group}$", texts["configs/train.yaml"], re.M)
    (row,) = [line for line in texts["README.md"].splitlines() if line.startswith("| `default` |")]
    devices = {"-1": "all"}.get(str(answers["devices"]), str(answers["devices"]))
    shown = [cell.strip().strip("`") for cell in row.strip("|").split("|")]
    expected = [str(answers["accelerator"]), devices, str(answers["strategy"])]
    assert shown[1:5] == [*expected, str(answers["precision"])], row
    check_readme_tells_the_answers(texts["README.md"], answers)
    pyproject = parse_toml(texts["pyproject.toml"])
    project = pyproject["project"]
    assert project["name"] == answers["project_slug"]
    assert project["description"] == answers["description"]
    author = {"name": answers["author_name"]}
    if answers["author_email"]:
        author["email"] = answers["author_email"]
    assert project["authors"] == [author]
    license_name = str(answers["license"])
    assert project["license"] == {"text": PYPROJECT_LICENSE.get(license_name, license_name)}
    assert project["requires-python"] == f">={answers['python_version']}"
    assert pyproject["tool"]["mypy"]["python_version"] == answers["python_version"]
    assert f"{answers['package_name']}.machinery.run.train:main" in project["scripts"].values()
    # Its own lock: the template's (the same dependency lists), under the project's name.
    root = parse_toml((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == root["dependencies"]
    assert project["optional-dependencies"] == root["optional-dependencies"]
    assert f"{answers['project_slug']} (pyproject.toml)" in texts["requirements/lock.txt"]
    # Its CI runs `make test`; the soak tier is the template's CI's, and a project's on request.
    assert texts[".ci/run"].endswith("\nmake lint\nmake test\nmake test-slurm\n"), texts[".ci/run"]
    head = LICENSE_HEADS[license_name].format(year=answers["__year"], holder=answers["author_name"])
    assert texts["LICENSE"].startswith(head)
    if answers["ci_workflow"]:
        assert f'python-version: "{answers["python_version"]}"' in texts[CI_WORKFLOW]


def check_readme_tells_the_answers(readme: str, answers: dict[str, object]) -> None:
    """The README names the project's Python, logger, accelerator, devices, strategy and
    precision, and no other Python or default logger."""
    version, logger = str(answers["python_version"]), str(answers["logger"])
    assert f"\nWith Python {version} or newer, `make` and git" in readme
    others = set(CHOICES["python_version"]) - {version}
    assert not [v for v in others if f"Python {v} or newer" in readme]
    start = readme.index("\n**Defaults.** ")
    defaults = " ".join(readme[start : readme.index("\n\n", start + 1)].split())
    assert defaults.startswith(f"**Defaults.** Python {version} or newer. ")
    assert f"Logger `{LOGGER_GROUP[logger]}`: " in defaults
    devices = {"1": "1 device", "-1": "`devices=-1`", "auto": "`devices=auto`"}
    for said in (
        f"(`accelerator={answers['accelerator']}`",
        devices.get(str(answers["devices"]), f"{answers['devices']} devices"),
        f"strategy `{answers['strategy']}`",
        f"precision `{answers['precision']}`",
    ):
        assert said in defaults, (said, defaults)
    opening = " ".join(readme[: readme.index("\n## ")].split())
    promised = "and Weights & Biases logging that goes offline by itself."
    assert (promised in opening) == (logger == "wandb"), opening
    if logger != "wandb":
        assert f"and {LOGGER_NAMES[logger]} logging (Weights & Biases one override away)" in opening
    # the Quickstart's sample output shows wandb going offline only where a run logs to wandb,
    # and its run id (`v_num`) in the progress bar too
    assert ("\nINFO: wandb: no credentials found" in readme) == (logger == "wandb")
    assert ("v_num=" in readme) == (logger == "wandb")
    check_layout_is_aligned(readme)
    # the Quickstart's `make test` names the rest of what CI runs (.ci/run)
    (line,) = [x for x in readme.splitlines() if x.startswith("make test ")][:1]
    assert "CI" in line and "make lint" in line and "make test-slurm" in line, line


def check_layout_is_aligned(readme: str) -> None:
    """The Layout's blocks: each path's line count ends in the block's one column, at least
    three spaces after the longest path (the package name's length changes the paths)."""
    row = re.compile(r"^(\S+)( +)(\d+)  ")
    lines = readme[readme.index("\n## Layout") : readme.index("\n## Bring your own")].splitlines()
    blocks = [list(g) for k, g in itertools.groupby(lines, key=lambda x: bool(row.match(x))) if k]
    assert len(blocks) == 2
    for block in blocks:
        rows = [row.match(line) for line in block]
        assert len({m.end(3) for m in rows if m}) == 1, "\n".join(block)
        assert min(len(m[2]) for m in rows if m) >= 3, "\n".join(block)


@pytest.mark.slow
def test_the_covering_set_generates_lint_clean_projects_that_carry_their_answers(
    gen: ModuleType, template: object, tmp_path: Path
) -> None:
    """Every pair of answers, every trainer combination: each project carries its answers and
    passes ruff (check and format, as its `make lint`); the combinations that never run are
    refused in one line."""
    start = time.perf_counter()
    rows = covering_set()
    made = refused = 0
    for i, row in enumerate(rows):
        answers = answers_for(row)
        if never_runs(answers):
            (problem,) = gen.problems(template, answers)
            assert problem.startswith(f"accelerator={answers['accelerator']} with ")
            refused += 1
            continue
        files = gen.render(template, answers)
        check_project(files, answers)
        gen.write(files, tmp_path / f"{i:03d}-{answers['project_slug'][:20]}")
        made += 1
    rendered = time.perf_counter() - start
    for command in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *command], cwd=tmp_path, capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout[-3000:]
    print(
        f"covering set: {len(rows)} answers, {made} projects, {refused} refused; "
        f"rendered and written in {rendered:.1f} s, ruff-clean in "
        f"{time.perf_counter() - start - rendered:.1f} s"
    )
    assert {tuple(r[k] for k in TRAINER) for r in rows} == set(
        itertools.product(*(QUESTIONS[k] for k in TRAINER))
    )
    assert not _uncovered_pairs(rows)


def _uncovered_pairs(rows: list[dict[str, object]]) -> set[frozenset]:
    """The pairs of answers no generated project of `rows` holds (besides those never run)."""
    generated = [pairs_of(row) for row in rows if not never_runs(row)]
    possible = {p for p in _every_pair() if not never_runs(dict(p), partial=True)}
    return possible - set().union(*generated)


def test_the_root_is_what_a_no_input_generation_gives(tmp_path: Path, cc_config: Path) -> None:
    year = re.search(r"Copyright \(c\) (\d{4})", (ROOT / "LICENSE").read_text())
    assert year, "the root LICENSE lost its copyright line"
    project = Path(
        cookiecutter(
            str(ROOT),
            no_input=True,
            output_dir=str(tmp_path),
            config_file=str(cc_config),
            extra_context={"__year": year.group(1)},
        )
    )
    assert project.name == "my-project"
    generated = sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file())
    generated.remove(".cruft.json")  # the template's origin, for `make update` (test_sources.py)
    assert generated == root_files()
    for rel in generated:
        expected = (ROOT / rel).read_bytes()
        if b"template-only:start" in expected:
            expected = without_template_blocks(expected.decode(), rel.endswith(".md")).encode()
        assert (project / rel).read_bytes() == expected, f"{rel} differs from the root's"
        assert (project / rel).stat().st_mode == (ROOT / rel).stat().st_mode, rel


def test_cookiecutter_writes_what_the_generator_renders_for_every_value(
    gen: ModuleType, template: object, tmp_path: Path, cc_config: Path
) -> None:
    """Through cookiecutter and its hook, each value of each question at least once."""
    devices = QUESTIONS["devices"]
    for i in range(max(len(values) for values in QUESTIONS.values() if len(values) < 5)):
        answers = {key: values[i % len(values)] for key, values in CHOICES.items()}
        answers.update(project_name=f"Vision Round {i}", devices=devices[i % len(devices)])
        assert not never_runs(answers)
        project = Path(
            cookiecutter(
                str(ROOT),
                no_input=True,
                output_dir=str(tmp_path / str(i)),
                config_file=str(cc_config),
                extra_context={**answers, "ci_workflow": "yes" if i % 2 == 0 else "no"},
            )
        )
        assert project.name == f"vision-round-{i}"
        full = {
            **DEFAULTS,
            **answers,
            "ci_workflow": i % 2 == 0,
            "project_slug": project.name,
            "package_name": project.name.replace("-", "_"),
            "__year": re.search(r"\d{4}", (project / "LICENSE").read_text()).group(),
        }
        rendered = gen.render(template, full)
        check_project(rendered, full)
        on_disk = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
        assert on_disk == {*rendered, ".cruft.json"}
        for rel, entry in rendered.items():
            assert (project / rel).read_bytes() == entry.data, rel
            assert (project / rel).stat().st_mode & 0o777 == entry.mode, rel


@pytest.mark.parametrize(
    ("accelerator", "devices", "strategy", "precision", "logger", "loggers"),
    [
        ("cpu", "2", "ddp", "bf16-mixed", "tensorboard", {"tensorboard"}),
        ("gpu", "auto", "dp", "16-mixed", "csv", {"csv"}),
        ("mps", "1", "auto", "32-true", "wandb", {"csv", "wandb"}),
    ],
)
def test_chosen_defaults_compose_into_the_config_and_stay_overridable(
    gen: ModuleType,
    template: object,
    tmp_path: Path,
    accelerator: str,
    devices: str,
    strategy: str,
    precision: str,
    logger: str,
    loggers: set[str],
) -> None:
    answers = {
        **DEFAULTS,
        "project_name": "Acme Vision",
        "project_slug": "acme-vision",
        "package_name": "acme_vision",
        "accelerator": accelerator,
        "devices": devices,
        "strategy": strategy,
        "precision": precision,
        "logger": logger,
    }
    gen.write(gen.render(template, answers), tmp_path)
    with initialize_config_dir(config_dir=str(tmp_path / "configs"), version_base="1.3"):
        cfg = compose(config_name="train")
        on_cpu = compose(config_name="train", overrides=["trainer=cpu"])
        overridden = compose(
            config_name="train",
            overrides=[
                "trainer.devices=3",
                "trainer.strategy=auto",
                "trainer.accelerator=cpu",
                "trainer.precision=64-true",
                "logger=none",
            ],
        )
    trainer = cfg.trainer
    expected_devices = int(devices) if devices.lstrip("-").isdigit() else devices
    assert (trainer.accelerator, trainer.devices, trainer.strategy, trainer.precision) == (
        accelerator,
        expected_devices,
        strategy,
        precision,
    )
    assert set(cfg.logger) == loggers
    assert cfg.logger.get("wandb", {}).get("project", "acme-vision") == "acme-vision"
    assert cfg.data._target_.startswith("acme_vision.")
    trainer = on_cpu.trainer  # a preset states every key, whatever the defaults
    assert (trainer.accelerator, trainer.devices, trainer.strategy, trainer.precision) == (
        "cpu",
        1,
        "auto",
        "32-true",
    )
    trainer = overridden.trainer
    assert (trainer.accelerator, trainer.devices, trainer.strategy, trainer.precision) == (
        "cpu",
        3,
        "auto",
        "64-true",
    )
    assert not overridden.logger


def test_generated_readme_is_the_projects_own(gen: ModuleType, template: object) -> None:
    answers = {
        **DEFAULTS,
        "project_name": "Acme Vision",
        "project_slug": "acme-vision",
        "package_name": "acme_vision",
    }
    files = gen.render(template, answers)
    readme = files["README.md"].data.decode()
    assert readme.startswith("# Acme Vision\n")
    assert "## Quickstart" in readme and "make train" in readme and "make update" in readme
    assert "src/acme_vision/" in readme
    assert "template-only" not in readme and "cookiecutter" not in readme.lower()
    # Removing the template-only blocks leaves no stray blank lines at the end.
    assert readme.endswith("\n") and not readme.endswith("\n\n")
    workflow = yaml.safe_load(files[CI_WORKFLOW].data)
    steps = workflow["jobs"]["test"]["steps"]
    assert steps[1]["with"]["python-version"] == "3.10"
    assert steps[-1]["run"] == "bash .ci/run"


def test_without_git_the_walk_finds_the_same_files(gen: ModuleType, tmp_path: Path) -> None:
    """A template that is not a git checkout (a downloaded zip) gives the same project files,
    without the run artifacts that .gitignore names."""
    copy = tmp_path / "template"
    # Virtual environments (CI makes .venv-ci inside the checkout) and caches are not what the
    # walk is about, and copying a running interpreter fails ("Text file busy").
    skip = shutil.ignore_patterns(".git", ".venv*", "*_cache", "__pycache__")
    shutil.copytree(ROOT, copy, ignore=skip, symlinks=True)
    for artifact in (
        "logs/train/runs/x/metrics.json",
        "src/my_project/__pycache__/train.cpython-311.pyc",
        ".venv-ci/bin/python",
        "data/mnist/train.idx",
        "outputs/last.ckpt",
        "slurm-7.out",  # an sbatch job's log
    ):
        (copy / artifact).parent.mkdir(parents=True, exist_ok=True)
        (copy / artifact).write_text("artifact")
    assert gen.project_paths(copy) == root_files()


def test_a_file_an_edit_no_longer_fits_stops_generation(gen: ModuleType, template: object) -> None:
    files = dict(template.files)
    trainer = files["configs/trainer/default.yaml"]
    files["configs/trainer/default.yaml"] = dataclasses.replace(
        trainer, data=trainer.data.replace(b"\nprecision:", b"\n# precision:")
    )
    with pytest.raises(gen.GenerationError, match=r"configs/trainer/default\.yaml.*\(0 found\)"):
        gen.render(dataclasses.replace(template, files=files), DEFAULTS)


def test_imports_a_long_name_pushes_past_the_line_length_are_wrapped_as_ruff_would(
    gen: ModuleType,
) -> None:
    text = "from x import a\n    from my_project.machinery.data.resumable import A, B as C\n"
    wrapped = gen._wrap_long_imports(text, line_length=40)
    assert wrapped == (
        "from x import a\n"
        "    from my_project.machinery.data.resumable import (\n"
        "        A,\n"
        "        B as C,\n"
        "    )\n"
    )
    assert gen._wrap_long_imports(text, line_length=100) == text


def test_output_inside_the_template_checkout_is_not_copied_into_itself(
    tmp_path: Path, cc_config: Path
) -> None:
    """`cookiecutter . -o out` from the template: the new folder is untracked there."""
    repo = snapshot_repo(tmp_path / "template")
    result = run_cookiecutter_cli(".", Path("out"), cc_config, "project_name=Acme Vision", cwd=repo)
    assert result.returncode == 0, result.stderr[-3000:]
    project = repo / "out" / "acme-vision"
    answers = {**DEFAULTS, "project_name": "Acme Vision", "project_slug": "acme-vision"}
    answers["package_name"] = "acme_vision"
    on_disk = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert on_disk == {*expected_paths(answers), ".cruft.json"}


def test_a_csv_python_3_11_project_says_so_and_generation_prints_the_next_commands(
    tmp_path: Path, cc_config: Path
) -> None:
    """Non-default answers through cookiecutter's command line, run from the folder the
    project lands in, as a user types it: the README tells these answers, and the last lines
    are the commands to start with."""
    answers = ["project_name=Acme Vision", "logger=csv", "python_version=3.11"]
    made = subprocess.run(
        [
            *(sys.executable, "-m", "cookiecutter", "--no-input", "--config-file", str(cc_config)),
            *(str(ROOT), *answers),
        ],
        cwd=tmp_path,
        env=subprocess_env(PWD=str(tmp_path)),  # what the shell sets
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    project = tmp_path / "acme-vision"
    readme = (project / "README.md").read_text()
    check_readme_tells_the_answers(readme, {**DEFAULTS, "logger": "csv", "python_version": "3.11"})
    assert "Python 3.10" not in readme.replace("Python 3.10 to 3.13", "")
    assert "Logger `csv`: CSV files" in " ".join(readme.split())
    last = made.stdout.strip().splitlines()[-6:]
    assert last[0] == (
        f"Created Acme Vision in {project}: Python >=3.11, logger csv, accelerator=auto, "
        "devices=1, strategy=auto, precision=32-true."
    )
    assert last[1:] == [
        "Next:",
        "  cd acme-vision",
        '  git init && git add -A && git commit -m "Generated"',
        "  make train    # the first call installs .venv (torch, the lock: a few minutes), then trains",
        "  make test     # the tests CI runs",
    ]
    # elsewhere than the shell's folder: the whole path
    elsewhere = subprocess.run(
        [
            *(sys.executable, "-m", "cookiecutter", "--no-input", "--config-file", str(cc_config)),
            *(str(ROOT), "-o", str(tmp_path / "out"), "project_name=Acme Vision"),
            "accelerator=gpu",
        ],
        env=subprocess_env(PWD=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    assert f"\n  cd {tmp_path / 'out' / 'acme-vision'}\n" in elsewhere.stdout
    assert (
        "\n  make train ARGS=trainer=cpu    # on a machine without that GPU\n" in elsewhere.stdout
    )
