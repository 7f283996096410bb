"""Generated projects as their users get them: installed, run, linted, and passing their own tests."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, run_cookiecutter_cli, subprocess_env
from .expected import CHOICES

# Representative answers. The trainer defaults (accelerator, devices, strategy) stay the root's
# here: the projects' own tests/test_configs.py asserts them (see the integration notes).
INSTALLED = {
    "acme-vision": ["project_name=Acme Vision"],  # the "done when": all defaults
    "deep-sea-survey": [
        "project_name=Deep Sea Survey",
        "package_name=sea_survey",
        "author_name=Ann O'Neil",
        'description=Counts "fish" in sonar images',
        "license=Apache-2.0",
        "python_version=3.11",
        "precision=bf16-mixed",
        "logger=tensorboard",
        "ci_workflow=no",
    ],
}


def layered_venv(path: Path) -> Path:
    """A virtual environment that sees the current one's packages (torch is not installed
    again), so the project installs there without touching the current environment."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parents = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "_parent_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    )
    return python


@pytest.mark.slow
@pytest.mark.parametrize("slug", list(INSTALLED))
def test_generated_project_installs_and_passes_its_own_quick_tests(
    tmp_path: Path, cc_config: Path, slug: str
) -> None:
    made = run_cookiecutter_cli(str(ROOT), tmp_path / "OUT", cc_config, *INSTALLED[slug])
    assert made.returncode == 0, made.stderr[-3000:]
    project = tmp_path / "OUT" / slug
    # src/ holds the package and hydra_plugins/ (the project's Optuna sweeper)
    package = next(p.name for p in (project / "src").iterdir() if p.name != "hydra_plugins")
    python = layered_venv(tmp_path / "venv")
    env = subprocess_env()

    def run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    install = run(
        python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."
    )
    assert install.returncode == 0, install.stderr[-3000:]
    where = run(python, "-c", f"import {package}; print({package}.__file__)")
    assert where.stdout.strip() == str(project / "src" / package / "__init__.py")
    script = run(tmp_path / "venv" / "bin" / f"{slug}-train", "--help")
    assert script.returncode == 0 and "== Configuration groups ==" in script.stdout

    tests = run(python, "-m", "pytest", "-m", "not slow", "-x", "-q", "-p", "no:cacheprovider")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    assert "tests/template" not in tests.stdout


LONG_NAME = pytest.param("Acme Vision Research Lab", "3.10", id="long-package-name")


@pytest.mark.parametrize(
    ("name", "python_version"),
    [*(("Acme Vision", version) for version in CHOICES["python_version"]), LONG_NAME],
)
def test_generated_project_is_lint_clean(
    tmp_path: Path, cc_config: Path, name: str, python_version: str
) -> None:
    """What the generated CI runs first: `ruff check .` and `ruff format --check .`."""
    out = tmp_path / "OUT"
    made = run_cookiecutter_cli(
        str(ROOT), out, cc_config, f"project_name={name}", f"python_version={python_version}"
    )
    assert made.returncode == 0, made.stderr[-3000:]
    (project,) = out.iterdir()
    for command in (["check", "."], ["format", "--check", "."]):
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *command], cwd=project, capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout[-3000:]


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
