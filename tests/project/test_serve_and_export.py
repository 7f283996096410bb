"""The examples after training: the digits classifier (MLP and CNN) and the diabetes regressor
served over HTTP (answers equal to predict.py's) and exported to ONNX (checked with ONNX
Runtime here too)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch

from my_project.data.diabetes import DiabetesDataModule
from my_project.data.digits import DigitsDataModule
from my_project.models.classifier import ImageClassifier
from my_project.models.regressor import TabularRegressor

from ..machinery.helpers import ROOT, run_entry
from ..machinery.serving import serving
from .example import TRAIN_CLASSIFIER

EXAMPLES = {
    "mlp": (TRAIN_CLASSIFIER, DigitsDataModule, ImageClassifier),
    "cnn": ([*TRAIN_CLASSIFIER, "model/net=cnn"], DigitsDataModule, ImageClassifier),
    "diabetes": (["experiment=diabetes"], DiabetesDataModule, TabularRegressor),
}
# The CNN's export is the MLP's with convolutions: a long repetition, for `make test-all`.
EXPORTED = ["mlp", pytest.param("cnn", marks=pytest.mark.exhaustive), "diabetes"]


class Trained:
    """Each example's best checkpoint after a short real training run, trained when first
    asked for."""

    def __init__(self, root: Path) -> None:
        self.root, self.checkpoints = root, {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.checkpoints:
            run_dir = self.root / name
            result = run_entry(
                "train",
                *EXAMPLES[name][0],
                "trainer.max_epochs=1",
                "logger=none",
                "test=false",
                f"hydra.run.dir={run_dir}",
            )
            assert result.returncode == 0, result.stderr[-3000:]
            self.checkpoints[name] = next((run_dir / "checkpoints").glob("epoch_*.ckpt"))
        return self.checkpoints[name]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    return Trained(tmp_path_factory.mktemp("trained"))


def split_inputs(data_class: type) -> np.ndarray:
    data = data_class()
    data.prepare_data()
    data.setup("test")
    return torch.cat([batch[0] for batch in data.test_dataloader()]).numpy()


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
@pytest.mark.parametrize(  # serving a regressor: the exhaustive tier's (the MLP, and test_serve.py)
    "name", ["mlp", pytest.param("diabetes", marks=pytest.mark.exhaustive)]
)
def test_served_answers_equal_predict_py(trained: Trained, name: str, tmp_path: Path) -> None:
    checkpoint, data_class = trained[name], EXAMPLES[name][1]
    inputs = split_inputs(data_class)
    result = run_entry("predict", f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path / 'p'}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_csv(tmp_path / "p" / "predictions.csv")
    with serving(f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path / 's'}") as server:
        status, answer = server.predict({"inputs": inputs.tolist()})
        assert status == 200, answer
        status, one = server.predict({"inputs": inputs[0].tolist()})
        assert status == 200, one
        if name == "mlp":
            client = run_guide_client(server.port)
    assert len(rows) == len(inputs)
    if name == "diabetes":  # the regressor's forward: one number a sample
        assert list(answer) == ["prediction"] and isinstance(one["prediction"], float)
        written = np.array([float(row["prediction"]) for row in rows])
        assert np.abs(np.array(answer["prediction"]) - written).max() <= 1e-4  # 6 decimals
    else:  # the classifier's predict_step: {"prediction", "prob"}
        assert list(answer) == ["prediction", "prob"]
        assert answer["prediction"] == [int(row["prediction"]) for row in rows]
        written = np.array([[float(row[f"prob_{k}"]) for k in range(10)] for row in rows])
        assert np.abs(np.array(answer["prob"]) - written).max() <= 1e-6
        assert one["prediction"] == answer["prediction"][0] and len(one["prob"]) == 10
        # the guide's client sends the first digit of scikit-learn's set, alone
        digit = DigitsDataModule().load()[0][0][:1]
        model = ImageClassifier.load_from_checkpoint(checkpoint).eval()
        with torch.no_grad():
            expected = model.predict_step((digit,), 0)
        label, sure = client.split()
        assert int(label) == expected["prediction"].item()
        assert float(sure) == pytest.approx(expected["prob"].max().item(), abs=1e-6)


def run_guide_client(port: int) -> str:
    """The guide's client snippet (docs/after-training.md, "Serve"), word for word, but for the
    port."""
    guide = (ROOT / "docs" / "after-training.md").read_text()
    block = guide.split("<!-- serve-client:start -->")[1].split("<!-- serve-client:end -->")[0]
    code = block.strip().removeprefix("```python").removesuffix("```")
    assert code.count("localhost:8000") == 1
    result = subprocess.run(
        [sys.executable, "-c", code.replace("localhost:8000", f"localhost:{port}")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPORTED)
def test_exported_onnx_matches_pytorch_on_the_test_split(
    trained: Trained, name: str, tmp_path: Path
) -> None:
    checkpoint, data_class, model_class = trained[name], *EXAMPLES[name][1:]
    result = run_entry(
        "export", f"ckpt_path={checkpoint}", "format=onnx", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    path = tmp_path / "model.onnx"
    inputs = split_inputs(data_class)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"Wrote {path}: {model_class.__name__}.forward as ONNX")
    assert f"on the {len(inputs)} inputs of the test split" in last
    printed = float(last.rsplit("max abs difference ", 1)[1].rstrip("."))
    print(f"\n{name}: ONNX max abs difference {printed:.3g} on {len(inputs)} test inputs")

    model = model_class.load_from_checkpoint(checkpoint).eval()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (declared,) = session.get_inputs()
    assert declared.shape[1:] == list(inputs.shape[1:]) and isinstance(declared.shape[0], str)
    for batch in (inputs, inputs[:1], inputs[:7]):  # any batch size
        with torch.no_grad():
            expected = model(torch.from_numpy(batch)).numpy()
        (got,) = session.run(None, {"input": batch})
        assert got.shape == expected.shape
        assert np.allclose(got, expected, atol=1e-5, rtol=1e-4)  # export.yaml's bound
