"""A real offline wandb run of a 2-process DDP training: one run holding the resolved config,
tags and group, the metrics, the plots as images and the best checkpoint as an artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import DOCS_STYLE, clean_env, read_metrics, run_entry
from .wandb_run import WandbRun, offline_runs, read_wandb_run


@pytest.fixture(scope="module")
def ddp_wandb_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, WandbRun]:
    root = tmp_path_factory.mktemp("wandb_ddp")
    home, run_dir = root / "home", root / "run"
    home.mkdir()
    result = run_entry(
        "train",
        *DOCS_STYLE,
        "trainer.max_epochs=2",
        "trainer.strategy=ddp",
        "trainer.devices=2",
        "logger=wandb",
        "tags=[docs,smoke]",
        "logger.wandb.group=my-group",
        f"hydra.run.dir={run_dir}",
        cwd=root,
        env=clean_env(HOME=str(home)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, read_wandb_run(offline_runs(run_dir)[0])


@pytest.mark.slow
def test_ddp_training_makes_exactly_one_wandb_run(
    ddp_wandb_run: tuple[Path, WandbRun],
) -> None:
    run_dir, run = ddp_wandb_run
    everywhere = list(run_dir.parent.rglob("offline-run-*")) + list(run_dir.parent.rglob("run-*"))
    assert [p.name for p in everywhere if p.is_dir()] == [run.directory.name]
    assert run.exit_code == 0


@pytest.mark.slow
def test_run_config_is_the_resolved_config_with_tags_and_group(
    ddp_wandb_run: tuple[Path, WandbRun],
) -> None:
    run_dir, run = ddp_wandb_run
    assert run.tags == ["docs", "smoke"] and run.group == "my-group"
    assert run.config["paths"]["output_dir"] == str(run_dir)  # resolved, not `${hydra:...}`
    assert run.config["model"]["lr"] == 0.01
    assert run.config["model"]["num_features"] == 16  # was `${data.num_features}`
    assert (run.config["trainer"]["strategy"], run.config["trainer"]["devices"]) == ("ddp", 2)
    assert run.config["tags"] == ["docs", "smoke"]


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
