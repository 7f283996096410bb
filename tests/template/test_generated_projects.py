"""Generated projects as their users get them: installed, run, and passing their own tests.

Four projects that together take every accelerator, strategy, precision and logger, devices
2 and -1, and a name of 80 characters, each run their own quick suite (`make test-fast`) in
one environment that sees this one's packages: the promise that every answer gives a project
whose own tests and CI pass, on a CPU-only machine as CI is."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, layered_venv, run_cookiecutter_cli, subprocess_env
from .expected import CHOICES
from .test_generation import LONG_NAME

CONTRACT_TESTS = "tests/machinery/test_bring_your_own.py"

SUITES = {
    "deep-sea-survey": [  # the package name given; CI workflow left out
        "project_name=Deep Sea Survey",
        "package_name=sea_survey",
        "author_name=Ann O'Neil",
        'description=Counts "fish" in sonar images',
        "license=Apache-2.0",
        "python_version=3.11",
        *("accelerator=cpu", "strategy=ddp", "precision=32-true", "devices=2"),
        "logger=tensorboard",
        "ci_workflow=no",
    ],
    "gpu-vision": [
        "project_name=GPU Vision",
        *("accelerator=gpu", "strategy=dp", "precision=16-mixed", "devices=-1"),
        "logger=csv",
    ],
    "apple-vision": [
        "project_name=Apple Vision",
        *("accelerator=mps", "strategy=auto", "precision=32-true", "devices=auto"),
        "logger=wandb",
    ],
    LONG_NAME.lower().replace(" ", "-"): [
        f"project_name={LONG_NAME}",
        *("accelerator=auto", "strategy=auto", "precision=bf16-mixed", "devices=1"),
        "license=proprietary",  # python_version: at most the Python that runs these tests
    ],
}


def test_the_suites_cover_every_trainer_and_logger_answer() -> None:
    answers = [dict(a.split("=", 1) for a in suite) for suite in SUITES.values()]
    for key in ("accelerator", "strategy", "precision", "logger"):
        assert {a.get(key, CHOICES[key][0]) for a in answers} == set(CHOICES[key]), key
    assert {"2", "-1"} <= {a["devices"] for a in answers}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The four projects, generated and installed (editable, no dependencies) into one
    environment layered on this one."""
    base = tmp_path_factory.mktemp("suites")
    config = base / "cookiecutter-config.yaml"
    config.write_text(f"cookiecutters_dir: {base / 'cc'}\nreplay_dir: {base / 'replay'}\n")
    python = layered_venv(base / "venv")
    for slug, answers in SUITES.items():
        made = run_cookiecutter_cli(str(ROOT), base, config, *answers)
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
        install = subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."],
            cwd=base / slug,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert install.returncode == 0, install.stderr[-3000:]
    return base, python


@pytest.mark.slow
@pytest.mark.parametrize("slug", list(SUITES))
def test_generated_project_passes_its_own_quick_tests(
    installed: tuple[Path, Path], slug: str
) -> None:
    base, python = installed
    project = base / slug
    # src/ holds the package and hydra_plugins/ (the project's Optuna sweeper)
    package = next(p.name for p in (project / "src").iterdir() if p.name != "hydra_plugins")
    env = subprocess_env()

    def run(*args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    where = run(python, "-c", f"import {package}; print({package}.__file__)")
    assert where.stdout.strip() == str(project / "src" / package / "__init__.py")
    script = run(python.parent / f"{slug}-train", "--help")
    assert script.returncode == 0 and "== Configuration groups ==" in script.stdout

    start = time.perf_counter()
    tests = run(python, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider")
    print(f"{slug}: its make test-fast in {time.perf_counter() - start:.0f} s")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    assert "tests/template" not in tests.stdout


@pytest.mark.slow
def test_a_generated_project_keeps_the_bring_your_own_contract(
    installed: tuple[Path, Path],
) -> None:
    """A team's docs-style module and data, in a project generated with DDP answers: one
    process, two (DDP test metrics equal to a one-process evaluation), dp, eval and predict."""
    base, python = installed
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", CONTRACT_TESTS],
        cwd=base / "deep-sea-survey",
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "skipped" not in tests.stdout


def test_generated_entry_point_uses_the_chosen_defaults_and_takes_overrides(
    tmp_path: Path, cc_config: Path
) -> None:
    made = run_cookiecutter_cli(
        str(ROOT),
        tmp_path,
        cc_config,
        "project_name=Acme Vision",
        *("accelerator=cpu", "devices=2", "strategy=ddp", "precision=16-mixed", "logger=csv"),
    )
    assert made.returncode == 0, made.stderr[-3000:]
    project = tmp_path / "acme-vision"

    def job_config(*overrides: str) -> dict:
        shown = subprocess.run(
            [sys.executable, "train.py", "--cfg", "job", *overrides],
            cwd=project,
            env=subprocess_env(PYTHONPATH=str(project / "src")),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr[-3000:]
        return yaml.safe_load(shown.stdout)

    cfg = job_config()
    trainer = cfg["trainer"]
    assert (trainer["accelerator"], trainer["devices"], trainer["strategy"]) == ("cpu", 2, "ddp")
    assert trainer["precision"] == "16-mixed" and set(cfg["logger"]) == {"csv"}
    cfg = job_config("trainer.devices=1", "trainer.strategy=dp", "logger=tensorboard")
    assert (cfg["trainer"]["devices"], cfg["trainer"]["strategy"]) == (1, "dp")
    assert set(cfg["logger"]) == {"tensorboard"}
