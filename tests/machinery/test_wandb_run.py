"""A real offline wandb run of a 2-process DDP training: one run holding the resolved config,
tags and group, the metrics, the plots as images and the best checkpoint as an artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import DDP_GROUP, DDP_TAGS
from .helpers import read_metrics
from .wandb_run import WandbRun, offline_runs, read_wandb_run


@pytest.fixture(scope="module")
def ddp_wandb_run(ddp_docs_run: Path) -> tuple[Path, WandbRun]:
    """The session's 2-process run on the docs-style module (conftest.py), with wandb."""
    return ddp_docs_run, read_wandb_run(offline_runs(ddp_docs_run)[0])


@pytest.mark.slow
def test_ddp_training_makes_exactly_one_wandb_run(
    ddp_wandb_run: tuple[Path, WandbRun],
) -> None:
    run_dir, run = ddp_wandb_run
    root = run_dir.parents[3]  # where the run started (its working directory), HOME, logs
    everywhere = list(root.rglob("offline-run-*")) + list(root.rglob("run-*"))
    assert [p.name for p in everywhere if p.is_dir()] == [run.directory.name]
    assert run.exit_code == 0


@pytest.mark.slow
def test_run_config_is_the_resolved_config_with_tags_and_group(
    ddp_wandb_run: tuple[Path, WandbRun],
) -> None:
    run_dir, run = ddp_wandb_run
    assert run.tags == DDP_TAGS and run.group == DDP_GROUP
    assert run.config["paths"]["output_dir"] == str(run_dir)  # resolved, not `${hydra:...}`
    assert run.config["model"]["lr"] == 0.01
    assert run.config["model"]["num_features"] == 16  # was `${data.num_features}`
    assert run.config["trainer"]["devices"] == 2
    assert run.config["tags"] == DDP_TAGS


@pytest.mark.slow
def test_run_history_holds_the_metrics_of_the_run(ddp_wandb_run: tuple[Path, WandbRun]) -> None:
    run_dir, run = ddp_wandb_run
    assert {"train_loss_epoch", "train_acc_epoch", "val_acc", "test_acc"} <= set(run.history)
    assert run.history["test_acc"] == pytest.approx(read_metrics(run_dir)["test_acc"])


@pytest.mark.slow
@pytest.mark.parametrize("plot", ["learning_curves", "confusion_matrix"])
def test_plots_are_logged_as_images(ddp_wandb_run: tuple[Path, WandbRun], plot: str) -> None:
    _, run = ddp_wandb_run
    assert run.history[f"plots/{plot}/_type"] == "images/separated"  # a list of one image
    (media,) = run.history[f"plots/{plot}/filenames"]
    assert media in run.files
    png = run.directory / "files" / media
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.slow
def test_best_checkpoint_is_recorded_as_a_model_artifact(
    ddp_wandb_run: tuple[Path, WandbRun],
) -> None:
    run_dir, run = ddp_wandb_run
    (best,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    (artifact,) = run.artifacts
    assert artifact.type == "model" and "best" in artifact.aliases
    (entry,) = artifact.manifest.contents
    assert entry.path == "model.ckpt"
    # Referenced where it is, so `wandb sync` uploads this file later.
    assert Path(entry.local_path) == best and entry.size == best.stat().st_size
