"""Generation: every combination of the choices, the root as its own --no-input generation,
answers landing in the configs, and the ways the hook finds the template."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import shutil
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

from .conftest import ROOT, git, load_hook_module, run_cookiecutter_cli, snapshot_repo
from .expected import (
    CHOICES,
    CI_WORKFLOW,
    DEFAULT_NAME,
    DEFAULTS,
    expected_paths,
    root_files,
    without_template_blocks,
)

# Free-text answers cycle through these while the choices run through every combination.
NAMES = [
    ("Acme Vision", "acme-vision", "acme_vision"),
    ("Café Vision 2", "cafe-vision-2", "cafe_vision_2"),
    ("X", "x", "x"),
    ("Deep Sea Survey", "deep-sea-survey", "sea_survey"),  # a package name given explicitly
]
DEVICES = ["1", "2", "auto", "-1", "8"]
AUTHORS = [("Ann O'Neil", "ann@example.org"), ('Bo "B" Li', ""), ("Ünal Çelik", "u@x.io")]
LICENSE_HEADS = {
    "MIT": "MIT License\n\nCopyright (c) {year} {holder}\n",
    "Apache-2.0": "\n                                 Apache License\n",
    "BSD-3-Clause": "BSD 3-Clause License\n\nCopyright (c) {year}, {holder}\n",
    "proprietary": "Copyright (c) {year} {holder}. All rights reserved.\n",
}
PYPROJECT_LICENSE = {"proprietary": "Proprietary"}
DEFAULT_NAMES = ("my_project", "my-project", "my project")  # any case, as DEFAULT_NAME
LOGGER_GROUP = {"wandb": "default", "tensorboard": "tensorboard", "csv": "csv"}


@functools.lru_cache(maxsize=1024)
def parse_toml(text: str) -> dict:
    return tomllib.loads(text)


def all_answers() -> list[dict[str, object]]:
    keys = [*CHOICES, "ci_workflow"]
    values = [*CHOICES.values(), [True, False]]
    combos = []
    for i, combo in enumerate(itertools.product(*values)):
        name, slug, package = NAMES[i % len(NAMES)]
        author, email = AUTHORS[i % len(AUTHORS)]
        combos.append(
            {
                **DEFAULTS,
                **dict(zip(keys, combo, strict=True)),
                "project_name": name,
                "project_slug": slug,
                "package_name": package,
                "author_name": author,
                "author_email": email,
                "description": f'Project "{name}" \\ with a backslash',
                "devices": DEVICES[i % len(DEVICES)],
                "__year": "2031",
            }
        )
    return combos


def check_project(files: dict[str, object], answers: dict[str, object]) -> None:
    """The exact file set, nothing unrendered or left of the template's names, answers in place."""
    assert set(files) == expected_paths(answers)  # cached per names: a set of ~100 paths
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
    trainer = texts["configs/trainer/default.yaml"]
    for key in ("accelerator", "devices", "strategy", "precision"):
        assert re.search(rf"^{key}: {re.escape(str(answers[key]))}$", trainer, re.M), key
    group = LOGGER_GROUP[str(answers["logger"])]
    assert re.search(rf"^  - logger: {group}$", texts["configs/train.yaml"], re.M)
    project = parse_toml(texts["pyproject.toml"])["project"]
    assert project["name"] == answers["project_slug"]
    assert project["description"] == answers["description"]
    author = {"name": answers["author_name"]}
    if answers["author_email"]:
        author["email"] = answers["author_email"]
    assert project["authors"] == [author]
    license_name = str(answers["license"])
    assert project["license"] == {"text": PYPROJECT_LICENSE.get(license_name, license_name)}
    assert project["requires-python"] == f">={answers['python_version']}"
    assert f"{answers['package_name']}.machinery.run.train:main" in project["scripts"].values()
    head = LICENSE_HEADS[license_name].format(year=answers["__year"], holder=answers["author_name"])
    assert texts["LICENSE"].startswith(head)
    if answers["ci_workflow"]:
        assert f'python-version: "{answers["python_version"]}"' in texts[CI_WORKFLOW]


def test_every_combination_of_the_choices_generates_the_exact_project(
    gen: ModuleType, template: object
) -> None:
    combos = all_answers()
    assert len(combos) == 2 * len(list(itertools.product(*CHOICES.values())))
    for answers in combos:
        check_project(gen.render(template, answers), answers)


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
    assert generated == root_files()
    for rel in generated:
        expected = (ROOT / rel).read_bytes()
        if rel == "README.md":
            expected = without_template_blocks(expected.decode()).encode()
        assert (project / rel).read_bytes() == expected, f"{rel} differs from the root's"
        assert (project / rel).stat().st_mode == (ROOT / rel).stat().st_mode, rel


def test_cookiecutter_writes_what_the_generator_renders_for_every_value(
    gen: ModuleType, template: object, tmp_path: Path, cc_config: Path
) -> None:
    """Through cookiecutter and its hook, each value of each choice at least once."""
    rounds = max(len(values) for values in CHOICES.values())
    for i in range(rounds):
        answers = {key: values[i % len(values)] for key, values in CHOICES.items()}
        answers.update(project_name=f"Vision Round {i}", ci_workflow=i % 2 == 0, devices=str(i + 1))
        project = Path(
            cookiecutter(
                str(ROOT),
                no_input=True,
                output_dir=str(tmp_path / str(i)),
                config_file=str(cc_config),
                extra_context={**answers, "ci_workflow": "yes" if answers["ci_workflow"] else "no"},
            )
        )
        assert project.name == f"vision-round-{i}"
        full = {
            **DEFAULTS,
            **answers,
            "project_slug": project.name,
            "package_name": project.name.replace("-", "_"),
            "__year": re.search(r"\d{4}", (project / "LICENSE").read_text()).group(),
        }
        rendered = gen.render(template, full)
        check_project(rendered, full)
        on_disk = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
        assert on_disk == set(rendered)
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
    readme = gen.render(template, answers)["README.md"].data.decode()
    assert readme.startswith("# Acme Vision\n")
    assert "## Quickstart" in readme and "pip install -e" in readme
    assert "src/acme_vision/" in readme
    assert "template-only" not in readme and "cookiecutter" not in readme.lower()
    # Removing the template-only blocks leaves no stray blank lines at the end.
    assert readme.endswith("\n") and not readme.endswith("\n\n")
    workflow = yaml.safe_load(gen.render(template, answers)[CI_WORKFLOW].data)
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


def test_template_is_found_from_a_relative_path(tmp_path: Path, cc_config: Path) -> None:
    """Cookiecutter passes a relative `_repo_dir` as typed; the hook runs elsewhere."""
    result = run_cookiecutter_cli(
        ROOT.name, tmp_path / "out", cc_config, "project_name=Acme Vision", cwd=ROOT.parent
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "acme-vision" / "src" / "acme_vision" / "machinery").is_dir()


def test_without_a_checkout_the_hook_clones_the_templates_commit(tmp_path: Path) -> None:
    """cruft passes only `_template` and `_commit`: where /proc does not show the checkout the
    hook runs from, that commit is cloned again."""
    hook = load_hook_module("post_gen_project")
    repo = snapshot_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "marker.txt").write_text("second commit")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    hook._parent_cwd = lambda: None
    (tmp_path / "scratch").mkdir()
    found = hook.template_checkout({"_template": str(repo), "_commit": first}, tmp_path / "scratch")
    assert found.is_relative_to(tmp_path / "scratch")
    assert (found / "hooks" / "project_generator.py").is_file()
    assert not (found / "marker.txt").exists()  # the commit asked for, not the newest


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
    assert on_disk == expected_paths(answers)
