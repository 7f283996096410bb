"""`python predict.py` for any module: a team's module without a `predict_step` gets each
batch's inputs through `forward`; one with its own `predict_step` gets the batches as its
data module gives them; what they return becomes the CSV's columns."""

from __future__ import annotations

import csv
import importlib
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from my_project.machinery.errors import UserError
from my_project.machinery.run.predict import prediction_columns

from .docs_style import LitClassifier, LitDataModule
from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    FAST,
    LOG_DIR_VAR,
    ROOT,
    clean_env,
    compose_config,
    run_entry,
)


class WithItsOwnPredictStep(LitClassifier):
    """Predicts from whole `(x, y)` batches, returning named columns."""

    def predict_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        x = batch[0]
        probabilities = torch.softmax(self(x), dim=1)
        return {"label": probabilities.argmax(dim=1), "score": probabilities}


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("predict_train")
    result = run_entry("train", *DOCS_STYLE, *FAST, "logger=none", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return next((run_dir / "checkpoints").glob("epoch_*.ckpt"))


def split_targets() -> list[int]:
    data = LitDataModule()
    data.setup("test")
    return data.test_set.tensors[1].tolist()


def expected_logits(checkpoint: Path) -> torch.Tensor:
    model = LitClassifier.load_from_checkpoint(checkpoint).eval()
    data = LitDataModule()
    data.setup("test")
    with torch.no_grad():
        return model(data.test_set.tensors[0])


def predict_into(out: Path, checkpoint: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """`python predict.py` on the docs-style module's checkpoint, its run directory `out`."""
    return run_entry(
        "predict", *DOCS_STYLE_EVAL, f"ckpt_path={checkpoint}", *overrides, f"hydra.run.dir={out}"
    )


@pytest.mark.slow
def test_a_module_without_predict_step_gets_the_inputs_as_readme_writes_it(
    checkpoint: Path, tmp_path: Path
) -> None:
    """`python predict.py ckpt_path=...`, word for word (default run directory)."""
    result = run_entry(
        "predict",
        *DOCS_STYLE_EVAL,
        f"ckpt_path={checkpoint}",
        env=clean_env(**{LOG_DIR_VAR: str(tmp_path)}),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (csv_path,) = (tmp_path / "predict" / "runs").glob("*/predictions.csv")
    rows = read_csv(csv_path)
    # a classifier (4 scores against class indices): its class and probabilities
    assert list(rows[0]) == [
        "index",
        "target",
        "prediction",
        "prob_0",
        "prob_1",
        "prob_2",
        "prob_3",
    ]
    assert len(rows) == 89 and f"Wrote 89 predictions for the test split to {csv_path}" in (
        result.stdout
    )
    probabilities = np.array([[float(row[f"prob_{k}"]) for k in range(4)] for row in rows])
    expected = torch.softmax(expected_logits(checkpoint), dim=1).numpy()
    assert np.allclose(probabilities, expected, atol=2e-6)
    assert [int(row["prediction"]) for row in rows] == expected.argmax(axis=1).tolist()
    assert [int(row["target"]) for row in rows] == split_targets()


@pytest.mark.slow
def test_a_module_with_its_own_predict_step_gets_whole_batches(
    checkpoint: Path, tmp_path: Path
) -> None:
    result = predict_into(tmp_path, checkpoint, f"model._target_={__name__}.WithItsOwnPredictStep")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_csv(tmp_path / "predictions.csv")
    assert list(rows[0]) == ["index", "target", "label", "score_0", "score_1", "score_2", "score_3"]
    labels = np.array([int(row["label"]) for row in rows])
    assert (labels == expected_logits(checkpoint).argmax(dim=1).numpy()).all()


def test_predict_runs_in_one_process_whatever_devices_the_trainer_preset_asks(
    tmp_path: Path,
) -> None:
    """A project generated with devices=2 (or dp on every GPU) predicts as the README writes
    it; asking for several processes on the command line is refused plainly."""
    cfg = compose_config([*DOCS_STYLE_EVAL, "trainer=ddp_cpu"], tmp_path, "predict")
    assert (cfg.trainer.devices, cfg.trainer.strategy, cfg.trainer.num_nodes) == (1, "auto", 1)
    assert cfg.trainer.accelerator == "cpu"  # the preset's, still
    cfg = compose_config(
        [*DOCS_STYLE_EVAL, "trainer=ddp_cpu", "trainer.devices=2"], tmp_path, "predict"
    )
    assert cfg.trainer.devices == 2  # the command line still wins: predict.py then refuses it


@pytest.mark.slow
def test_predict_asked_for_two_processes_says_to_use_one(checkpoint: Path, tmp_path: Path) -> None:
    result = predict_into(tmp_path / "out", checkpoint, "trainer.devices=2", "trainer.strategy=ddp")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "predict runs in one process, but the trainer config asks for 2 processes" in (
        " ".join(result.stderr.split())
    )


def test_predictions_become_columns_for_any_shape() -> None:
    batches = [torch.tensor([[0.5], [1.5]]), torch.tensor([[2.5]])]
    assert list(prediction_columns(batches)) == ["prediction"]
    named = prediction_columns([{"y": torch.tensor([1, 2]), "p": torch.rand(2, 3)}])
    assert list(named) == ["y", "p_0", "p_1", "p_2"]
    with pytest.raises(UserError, match="tensor or a dict of tensors"):
        prediction_columns([["not", "a", "tensor"]])


def test_console_scripts_point_at_callables() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert any(target.endswith(".predict:main") for target in scripts.values())
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target


class TwoTestLoaders(LitDataModule):
    """Its test split is two loaders (Lightning's `dataloader_idx`)."""

    def test_dataloader(self) -> list[Any]:
        from torch.utils.data import DataLoader, TensorDataset

        x, y = self.test_set.tensors
        halves = (TensorDataset(x[:40], y[:40]), TensorDataset(x[40:], y[40:]))
        return [DataLoader(half, batch_size=self.batch_size) for half in halves]


class ClassifierOnTwoTestLoaders(LitClassifier):
    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        super().test_step(batch, batch_idx)


@pytest.fixture(scope="module")
def two_loaders_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trained a step and tested on both loaders in this process, with the plots callback."""
    import lightning as L

    from my_project.machinery.callbacks.plots import PlotCallback

    run = tmp_path_factory.mktemp("two_test_loaders")
    L.seed_everything(0)
    model, data = ClassifierOnTwoTestLoaders(num_features=16, num_classes=4), TwoTestLoaders()
    trainer = L.Trainer(
        max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[PlotCallback(str(run))],
    )  # fmt: skip
    trainer.fit(model, datamodule=data)
    trainer.test(model, datamodule=data)
    trainer.save_checkpoint(run / "model.ckpt")
    return run


def test_several_test_loaders_get_one_confusion_matrix(two_loaders_run: Path) -> None:
    assert (two_loaders_run / "confusion_matrix.png").stat().st_size > 10_000
    assert not list(two_loaders_run.glob("confusion_matrix_*"))


def test_several_test_loaders_are_predicted_served_and_exported(
    two_loaders_run: Path, tmp_path: Path
) -> None:
    from my_project.machinery.run.export import export
    from my_project.machinery.run.predict import classifier_of, predict, split_loaders
    from my_project.machinery.run.serve import signature_of
    from my_project.machinery.run.serve_api import answer

    team = [
        *DOCS_STYLE_EVAL,
        f"model._target_={__name__}.ClassifierOnTwoTestLoaders",
        f"data._target_={__name__}.TwoTestLoaders",
        f"ckpt_path={two_loaders_run / 'model.ckpt'}",
    ]
    path = predict(compose_config(team, tmp_path / "predict", "predict"))
    rows = read_csv(path)
    assert len(rows) == 89 and list(rows[0])[:3] == ["index", "target", "prediction"]
    assert [int(row["target"]) for row in rows] == split_targets()  # both loaders, in order

    cfg = compose_config(team, tmp_path / "serve", "serve")
    model = ClassifierOnTwoTestLoaders.load_from_checkpoint(two_loaders_run / "model.ckpt")
    _, batch = split_loaders(cfg, model)
    shape, dtype = signature_of(batch[0], "ClassifierOnTwoTestLoaders")
    assert (shape, dtype) == ((16,), "float32")
    answered = answer(model.eval(), batch[0], None, classifier_of(model, batch))
    assert answered["prob"].shape == (len(batch[0]), 4)

    exported = export(compose_config(team, tmp_path / "export", "export"))
    assert exported.is_file()
