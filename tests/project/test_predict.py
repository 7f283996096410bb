"""`python predict.py` with the example: class probabilities of a checkpoint for a data split;
the inputs serve.py takes for it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from fastapi import HTTPException

from my_project.machinery.run.serve_api import request_inputs

from ..machinery.helpers import FAST, read_metrics, run_entry
from .example import TRAIN_CLASSIFIER


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def probabilities(rows: list[dict[str, str]]) -> np.ndarray:
    return np.array([[float(v) for k, v in row.items() if k.startswith("prob_")] for row in rows])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A short real training run and its best checkpoint."""
    run_dir = tmp_path_factory.mktemp("predict_train")
    result = run_entry("train", *TRAIN_CLASSIFIER, *FAST, "logger=none", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, next((run_dir / "checkpoints").glob("epoch_*.ckpt"))


@pytest.fixture(scope="module")
def test_split_predictions(
    trained: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("predict_split")
    result = run_entry("predict", f"ckpt_path={trained[1]}", f"hydra.run.dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote 270 predictions for the test split" in result.stdout
    return read_csv(out / "predictions.csv")


@pytest.mark.slow
def test_split_predictions_match_the_test_accuracy_of_the_training_run(
    trained: tuple[Path, Path], test_split_predictions: list[dict[str, str]]
) -> None:
    rows = test_split_predictions
    assert list(rows[0])[:3] == ["index", "target", "prediction"] and len(rows[0]) == 13
    probs = probabilities(rows)
    assert probs.shape == (270, 10)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    predicted = np.array([int(row["prediction"]) for row in rows])
    assert (predicted == probs.argmax(axis=1)).all()
    accuracy = np.mean(predicted == np.array([int(row["target"]) for row in rows]))
    # train.py tested the same (best) checkpoint on the same split.
    assert accuracy == pytest.approx(read_metrics(trained[0])["test/acc"], abs=1e-6)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((5, 1, 8, 8), (5, 1, 8, 8)),
        ((5, 8, 8), (5, 1, 8, 8)),
        ((1, 8, 8), (1, 1, 8, 8)),
        ((8, 8), (1, 1, 8, 8)),
    ],
)
def test_inputs_with_or_without_channel_axis_are_accepted(
    shape: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    """serve.py's requests: digits images with or without their one channel, one or several."""
    request = {"inputs": np.full(shape, 0.5).tolist()}
    array, _ = request_inputs(request, (1, 8, 8), "float32")
    assert array.shape == expected and array.dtype == np.float32


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (np.zeros((3, 3, 8, 8)).tolist(), r"shape \(3, 3, 8, 8\).*inputs shaped \(N, 1, 8, 8\)"),
        ([], "holds inputs of shape"),
        (["a", "b"], "could not convert string to float"),
    ],
)
def test_bad_inputs_say_what_shape_to_pass(content: object, message: str) -> None:
    with pytest.raises(HTTPException, match=message) as error:
        request_inputs({"inputs": content}, (1, 8, 8), "float32")
    assert error.value.status_code == 422
