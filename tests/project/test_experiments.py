"""Every `configs/experiment/*.yaml` recipe runs: one `fast_dev_run` step of train, val, test."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ..machinery.helpers import (
    CONFIG_DIR,
    DATA_DIR_VAR,
    ROOT,
    clean_env,
    read_metrics,
    run_entry,
)
from .test_data_mnist import write_fake_mnist

EXPERIMENTS = sorted(path.stem for path in (CONFIG_DIR / "experiment").glob("*.yaml"))


def test_there_are_at_least_two_documented_experiments() -> None:
    assert len(EXPERIMENTS) >= 2
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    documented = "\n".join(page.read_text() for page in pages if page.is_file())
    for name in EXPERIMENTS:
        assert f"experiment={name}" in documented, f"{name} is in neither README.md nor docs/"


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_one_fast_dev_run_step(name: str, tmp_path: Path) -> None:
    # Data that would be downloaded (MNIST) is replaced by small files written here.
    data_dir = tmp_path / "data"
    # Enough training images for the recipe's batch size (a smaller set is refused, rightly).
    write_fake_mnist(data_dir / "mnist", n_train=240, n_test=32)
    run_dir = tmp_path / "run"
    result = run_entry(
        "train",
        f"experiment={name}",
        "debug=fdr",
        f"hydra.run.dir={run_dir}",
        env=clean_env(**{DATA_DIR_VAR: str(data_dir)}),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Running in `fast_dev_run` mode" in result.stdout + result.stderr
    metrics = read_metrics(run_dir)
    assert any(key.startswith("test") for key in metrics), metrics  # test/acc, test_acc, ...
    # The run used the recipe: each of its plain settings reached the resolved config (but for
    # what debug=fdr sets), whatever the recipe's keys (a moved-in one's `model.optimizer.lr`).
    recipe = OmegaConf.load(CONFIG_DIR / "experiment" / f"{name}.yaml")
    used = OmegaConf.load(run_dir / "config.yaml")
    settings = leaves({k: v for k, v in recipe.items() if k not in ("defaults", "hydra")})
    fdr = leaves(OmegaConf.load(CONFIG_DIR / "debug" / "fdr.yaml"))
    assert settings and "monitor" in used
    for key, value in settings.items():
        if key not in fdr and not (isinstance(value, str) and "${" in value):
            assert OmegaConf.select(used, key) == value, key


def leaves(node: object, prefix: str = "") -> dict[str, object]:
    """The dotted keys of a config's plain values, and the values (lists whole)."""
    if not OmegaConf.is_dict(node) and not isinstance(node, dict):
        return {prefix: OmegaConf.to_object(node) if OmegaConf.is_config(node) else node}
    found: dict[str, object] = {}
    for key, value in node.items():  # type: ignore[attr-defined]
        found.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


@pytest.mark.slow
def test_the_example_search_runs_and_keeps_its_study(tmp_path: Path) -> None:
    """`python train.py -m hparams_search=mlp`, shortened: two trials of one epoch."""
    sweep = tmp_path / "sweep"
    result = run_entry(
        "train",
        "-m",
        "hparams_search=mlp",
        "hydra.sweeper.n_trials=2",
        "trainer.max_epochs=1",
        "logger=csv",
        f"hydra.sweep.dir={sweep}",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (sweep / "optuna.db").is_file() and (sweep / "best_params.yaml").is_file()
    assert all((sweep / job / "metrics.json").is_file() for job in ("0", "1"))
