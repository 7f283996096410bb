"""`python predict.py` with the example: class probabilities of a checkpoint for a data split
or a .npy file of images."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from my_project.data.digits import DigitsDataModule
from my_project.machinery.errors import UserError
from my_project.machinery.run.predict import load_inputs

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


@pytest.mark.slow
def test_npy_inputs_get_the_same_probabilities_as_the_split(
    trained: tuple[Path, Path], test_split_predictions: list[dict[str, str]], tmp_path: Path
) -> None:
    datamodule = DigitsDataModule()
    datamodule.setup("test")
    images = datamodule.splits["test"][0].numpy()[:, 0]  # (N, 8, 8): one channel, squeezed
    np.save(tmp_path / "inputs.npy", images)
    result = run_entry(
        "predict",
        f"ckpt_path={trained[1]}",
        f"input_path={tmp_path / 'inputs.npy'}",
        f"hydra.run.dir={tmp_path / 'out'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_csv(tmp_path / "out" / "predictions.csv")
    assert "target" not in rows[0]
    assert np.allclose(probabilities(rows), probabilities(test_split_predictions), atol=2e-6)


@pytest.mark.slow
def test_wrong_input_shape_is_a_clear_error_and_writes_nothing(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    np.save(tmp_path / "mnist_sized.npy", np.zeros((4, 28, 28), dtype=np.float32))
    result = run_entry(
        "predict",
        f"ckpt_path={trained[1]}",
        f"input_path={tmp_path / 'mnist_sized.npy'}",
        f"hydra.run.dir={tmp_path / 'out'}",
    )
    assert result.returncode == 2
    assert "holds an array of shape (4, 28, 28)" in result.stderr
    assert "takes inputs of shape (1, 8, 8)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("predictions.csv*"))


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
    tmp_path: Path, shape: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    np.save(tmp_path / "x.npy", np.full(shape, 0.5, dtype=np.float64))
    array = load_inputs(tmp_path / "x.npy", [1, 8, 8])
    assert array.shape == expected and array.dtype == np.float32


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (np.zeros((3, 3, 8, 8)), r"shape \(3, 3, 8, 8\).*takes inputs of shape \(1, 8, 8\)"),
        (np.zeros((0, 1, 8, 8)), "holds no inputs"),
        (np.array(["a", "b"]), "could not convert string to float"),
        (b"not numpy", "cannot be read as inputs"),
    ],
)
def test_bad_inputs_say_what_shape_to_pass(tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "x.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    with pytest.raises(UserError, match=message):
        load_inputs(path, [1, 8, 8])


def test_missing_input_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"No such file or directory.*numpy.save"):
        load_inputs(tmp_path / "nope.npy", [1, 8, 8])
