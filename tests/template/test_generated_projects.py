"""Generated projects as their users get them: installed, run, and passing their own tests.

Three projects that, with the root (the default answers), take every accelerator, strategy,
precision and logger, devices 2, -1 and auto, and a name of 80 characters, each run their own
quick suite (`make test-fast`) in one environment that sees this one's packages: the promise
that every answer gives a project whose own tests and CI pass, on a CPU-only machine as CI
is. The 80-character one runs in `make test` (so in the template's CI); the others, and the
CPU/DDP project's README commands, contract and replaced examples, in the soak tier."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, layered_venv, make_in, run_cookiecutter_cli, subprocess_env
from .expected import CHOICES, DEFAULTS
from .test_generation import LONG_NAME

CONTRACT_TESTS = "tests/machinery/test_bring_your_own.py"
README_TESTS = "tests/machinery/test_readme_commands.py"

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
    LONG_NAME.lower().replace(" ", "-"): [
        f"project_name={LONG_NAME}",
        *("accelerator=mps", "strategy=auto", "precision=bf16-mixed", "devices=auto"),
        "logger=wandb",
        "license=proprietary",  # python_version: at most the Python that runs these tests
    ],
}


def test_the_suites_and_the_root_cover_every_trainer_and_logger_answer() -> None:
    """The root is the default answers' project (test_generation.py), its suite `make test`."""
    answers = [dict(a.split("=", 1) for a in suite) for suite in SUITES.values()]
    for key in ("accelerator", "strategy", "precision", "logger"):
        chosen = {a.get(key, CHOICES[key][0]) for a in answers} | {DEFAULTS[key]}
        assert chosen == set(CHOICES[key]), key
    assert {"2", "-1", "auto"} <= {a["devices"] for a in answers}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Path]]:
    """The project of SUITES[slug], generated and installed (editable, no dependencies) into
    one environment layered on this one, when a test first asks for it: (folder, python)."""
    base = tmp_path_factory.mktemp("suites")
    config = base / "cookiecutter-config.yaml"
    config.write_text(f"cookiecutters_dir: {base / 'cc'}\nreplay_dir: {base / 'replay'}\n")
    python = layered_venv(base / "venv")

    def project(slug: str) -> tuple[Path, Path]:
        if not (base / slug).is_dir():
            made = run_cookiecutter_cli(str(ROOT), base, config, *SUITES[slug])
            assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
            pip_install = ("-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation")
            install = subprocess.run(
                [python, *pip_install, "-e", "."],
                cwd=base / slug,
                env=subprocess_env(),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert install.returncode == 0, install.stderr[-3000:]
        return base / slug, python

    return project


# deep-sea-survey's quick tests run in its copy whose examples are a team's module (below),
# with the contract and the README's commands in it as it was generated. The long name's
# suite is the one `make test` (and so CI) runs: the name most likely to break the renaming.
@pytest.mark.parametrize(
    "slug",
    [
        pytest.param(slug, marks=pytest.mark.soak if slug == "gpu-vision" else pytest.mark.slow)
        for slug in SUITES
        if slug != "deep-sea-survey"
    ],
)
def test_generated_project_passes_its_own_quick_tests(
    generated: Callable[[str], tuple[Path, Path]], slug: str
) -> None:
    project, python = generated(slug)
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
    tests = make_in(project, "test-fast", "ARGS=-q -p no:cacheprovider", venv=python.parents[1])
    print(f"{slug}: its make test-fast in {time.perf_counter() - start:.0f} s")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    assert "tests/template" not in tests.stdout


def _passes_in_deep_sea_survey(
    generated: Callable[[str], tuple[Path, Path]], tests_file: str
) -> None:
    """One test file of the generated CPU/DDP project, run by its own pytest: all pass, none
    skipped."""
    project, python = generated("deep-sea-survey")
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", tests_file],
        cwd=project,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "skipped" not in tests.stdout


@pytest.mark.soak
def test_a_generated_project_keeps_the_bring_your_own_contract(
    generated: Callable[[str], tuple[Path, Path]],
) -> None:
    """A team's docs-style module and data, in a project generated with DDP answers: one
    process, two (DDP test metrics equal to a one-process evaluation), dp, eval and predict."""
    _passes_in_deep_sea_survey(generated, CONTRACT_TESTS)


@pytest.mark.soak
def test_a_generated_projects_readme_commands_work_as_written(
    generated: Callable[[str], tuple[Path, Path]],
) -> None:
    """Its own README (CPU, DDP on 2 devices, TensorBoard answers): every command passes the
    checks of a run, or names what the machine lacks (its test_readme_commands.py)."""
    _passes_in_deep_sea_survey(generated, README_TESTS)


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


# What a team replaces when it puts its own model and data in a generated project: the example
# code of the team's rooms (README, "Layout"; the packages' __init__.py files stay), the
# example configs of those rooms, and the example's tests.
EXAMPLE_ROOMS = ("models", "data")
EXAMPLE_CONFIG_GROUPS = ("model", "data", "experiment", "hparams_search")

TEAM_FILES = {
    "configs/model/mine.yaml": """\
_target_: {package}.models.mine.LitClassifier
num_features: ${{data.num_features}}
num_classes: ${{data.num_classes}}
lr: 0.01
""",
    "configs/data/mine.yaml": """\
_target_: {package}.data.mine.LitDataModule
num_features: 16
num_classes: 4
test_size: 89
batch_size: 32
""",
    "configs/experiment/mine_wide.yaml": """\
# @package _global_
model:
  hidden: 64
trainer:
  max_epochs: 3
""",
    "configs/hparams_search/mine.yaml": """\
# @package _global_
defaults:
  - override /hydra/sweeper: optuna
optimized_metric: val_acc
hydra:
  mode: MULTIRUN
  sweeper:
    direction: maximize
    n_trials: 4
    params:
      model.lr: tag(log, interval(0.001, 0.1))
""",
    "configs/bench.yaml": """\
mine:
  overrides: [data.batch_size=64]
  steps: 50
  warmup: 5
""",
    "tests/project/test_mine.py": """\
import torch

from {package}.models.mine import LitClassifier


def test_one_logit_per_class() -> None:
    assert LitClassifier(num_features=16, num_classes=4)(torch.randn(8, 16)).shape == (8, 4)
""",
}


def _replace_examples_with_a_teams_module(project: Path, package: str) -> None:
    """Delete the example model, data, their configs, experiments and tests; put a team's
    docs-style module and data module (tests/machinery/docs_style.py), its configs and a test
    in their place, and point the entry configs at them."""
    for room in EXAMPLE_ROOMS:
        for path in (project / "src" / package / room).iterdir():
            if path.name != "__init__.py":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    for group in EXAMPLE_CONFIG_GROUPS:
        shutil.rmtree(project / "configs" / group)
    shutil.rmtree(project / "tests" / "project")
    (project / "tests" / "project").mkdir()
    (project / "tests" / "project" / "__init__.py").touch()

    source = (project / "tests" / "machinery" / "docs_style.py").read_text()
    (project / "src" / package / "models" / "mine.py").write_text(source)
    (project / "src" / package / "data" / "mine.py").write_text(source)
    for rel, text in TEAM_FILES.items():
        (project / rel).parent.mkdir(exist_ok=True)
        (project / rel).write_text(text.format(package=package))
    for entry in ("train", "eval", "predict", "serve", "export"):
        path = project / "configs" / f"{entry}.yaml"
        text = path.read_text()
        assert "  - data: digits\n" in text and "  - model: classifier\n" in text, entry
        text = text.replace("  - data: digits\n", "  - data: mine\n")
        text = text.replace("  - model: classifier\n", "  - model: mine\n")
        if entry == "train":
            text = text.replace("monitor: val/acc\n", "monitor: val_acc\n")
            text = text.replace("optimized_metric: val/acc_best\n", "optimized_metric: val_acc\n")
            assert "monitor: val_acc\n" in text and "optimized_metric: val_acc\n" in text
        path.write_text(text)


def _serve_one_request(python: Path, project: Path, best: Path, inputs: list) -> dict:
    """`python serve.py ckpt_path=<best>` in ``project`` on a free localhost port: the answer
    to one request, then the server stopped (SIGTERM)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(python), "serve.py", f"ckpt_path={best}", f"port={port}"],
        cwd=project,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "serve.py not ready in 180 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as ok:
                    if ok.read() == b"ok":
                        break
            except OSError:
                time.sleep(0.25)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/predict",
            data=json.dumps({"inputs": inputs}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=120)[0]
        assert server.returncode == 143, output[-3000:]


@pytest.mark.soak
def test_deleting_the_examples_leaves_the_machinery_tests_passing(
    generated: Callable[[str], tuple[Path, Path]],
) -> None:
    """A team replaces the example model, data, configs and tests of a generated project with
    its own docs-style module: `python train.py`, `eval.py`, `predict.py`, `export.py` and
    `serve.py` as the README writes them run the team's module (in a project whose trainer
    runs 2 processes), and the project's quick tests (the machinery's and the team's) all
    pass."""
    generated_project, _ = generated("deep-sea-survey")
    base = generated_project.parent
    project = base / "examples-deleted"
    shutil.copytree(generated_project, project, ignore=shutil.ignore_patterns("*.egg-info"))
    _replace_examples_with_a_teams_module(project, "sea_survey")
    python = layered_venv(base / "venv-examples-deleted")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."],
        cwd=project,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=project,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=900,
        )

    where = run(python, "-c", "import sea_survey; print(sea_survey.__file__)")
    assert where.stdout.strip() == str(project / "src" / "sea_survey" / "__init__.py")
    trained = run(python, "train.py", "trainer.max_epochs=1")
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    metrics = next((project / "logs" / "train" / "runs").rglob("metrics.json"))
    test_acc = json.loads(metrics.read_text())["test_acc"]
    assert 0.25 < test_acc <= 1.0  # four classes: better than chance after one epoch
    # eval and predict as the README writes them, in a project whose trainer runs 2 processes
    best = next((metrics.parent / "checkpoints").glob("epoch_*.ckpt"))
    evaluated = run(python, "eval.py", f"ckpt_path={best}")
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr[-3000:]
    metrics = next((project / "logs" / "eval" / "runs").rglob("metrics.json"))
    assert json.loads(metrics.read_text())["test_acc"] == test_acc
    predicted = run(python, "predict.py", f"ckpt_path={best}")
    assert predicted.returncode == 0, predicted.stdout[-3000:] + predicted.stderr[-3000:]
    csv = next((project / "logs" / "predict" / "runs").rglob("predictions.csv"))
    assert len(csv.read_text().splitlines()) == 1 + 89
    # after training, as the README writes it: export, and serve (one request)
    exported = run(python, "export.py", f"ckpt_path={best}", "format=onnx")
    assert exported.returncode == 0, exported.stdout[-3000:] + exported.stderr[-3000:]
    assert "on the 89 inputs of the test split" in exported.stdout
    assert next((project / "logs" / "export" / "runs").rglob("model.onnx")).is_file()
    served = _serve_one_request(python, project, best, [0.5] * 16)
    # a classifier without predict_step: its class and probabilities
    assert list(served) == ["prediction", "prob"] and len(served["prob"]) == 4

    start = time.perf_counter()
    tests = make_in(project, "test-fast", "ARGS=-q -p no:cacheprovider", venv=python.parents[1])
    print(f"examples replaced: make test-fast in {time.perf_counter() - start:.0f} s")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
