"""`python predict.py` with the example: class probabilities of a checkpoint for a data split or
for files of images; the inputs serve.py takes for it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from fastapi import HTTPException

from my_project.data.digits import DigitsDataModule
from my_project.machinery.errors import UserError
from my_project.machinery.run.inputs import Signature, Spec
from my_project.machinery.run.predict import predict
from my_project.machinery.run.serve_api import request_inputs

from ..machinery.helpers import FAST, compose_config, read_metrics, run_entry
from .example import TRAIN_CLASSIFIER

DIGITS = Signature((Spec("", (1, 8, 8), "float32"),), False, (), None)  # what serve.py reads


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
    arrays, _ = request_inputs(request, DIGITS)
    assert arrays[""].shape == expected and arrays[""].dtype == np.float32


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            np.zeros((3, 3, 8, 8)).tolist(),
            r"shape \(3, 3, 8, 8\), where the model takes \(N, 1, 8, 8\)",
        ),
        ([], "holds inputs of shape"),
        (["a", "b"], "could not convert string to float"),
    ],
)
def test_bad_inputs_say_what_shape_to_pass(content: object, message: str) -> None:
    with pytest.raises(HTTPException, match=message) as error:
        request_inputs({"inputs": content}, DIGITS)
    assert error.value.status_code == 422


@pytest.mark.slow
def test_image_files_get_the_probabilities_the_split_gets(
    trained: tuple[Path, Path], test_split_predictions: list[dict[str, str]], tmp_path: Path
) -> None:
    """The README's `input_path=`: the test images as a .npy file of (N, 8, 8) (one channel,
    squeezed) and as a .csv file of 64 pixels a row, predicted as the split (in process:
    `predict` is what predict.py runs)."""
    datamodule = DigitsDataModule()
    datamodule.setup("test")
    images = datamodule.splits["test"][0].numpy()[:, 0]
    np.save(tmp_path / "images.npy", images)
    np.savetxt(tmp_path / "images.csv", images.reshape(len(images), 64), delimiter=",")
    for name in ("images.npy", "images.csv"):
        overrides = [f"ckpt_path={trained[1]}", f"input_path={tmp_path / name}"]
        out = tmp_path / name.replace(".", "_")
        rows = read_csv(predict(compose_config(overrides, out, "predict")))
        assert list(rows[0])[:2] == ["index", "prediction"] and len(rows) == 270
        assert np.allclose(probabilities(rows), probabilities(test_split_predictions), atol=2e-6)


@pytest.mark.slow
def test_images_of_another_size_are_one_paragraph_and_nothing_is_written(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    np.save(tmp_path / "mnist_sized.npy", np.zeros((4, 28, 28), dtype=np.float32))
    overrides = [f"ckpt_path={trained[1]}", f"input_path={tmp_path / 'mnist_sized.npy'}"]
    with pytest.raises(UserError, match=r"holds inputs of shape \(4, 28, 28\), where the model "):
        predict(compose_config(overrides, tmp_path / "run", "predict"))
    assert not (tmp_path / "run").exists()
