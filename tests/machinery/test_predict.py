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
from my_project.machinery.run.predict import as_classes, classifier_of, prediction_columns

from .docs_style import LitClassifier, LitDataModule
from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    FAST,
    LOG_DIR_VAR,
    ROOT,
    SEARCH_MACHINERY_CONFIGS,
    clean_env,
    compose_config,
    run_entry,
)
from .zoo.padded import SequenceClassifier, SequenceData


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
    # a tuple (a heteroscedastic regressor's mean and log-variance): a column group each
    pairs = [(torch.tensor([1.0, 2.0]), torch.rand(2, 2)), (torch.tensor([3.0]), torch.rand(1, 2))]
    columns = prediction_columns(pairs)
    assert list(columns) == ["output_0", "output_1_0", "output_1_1"]
    assert columns["output_0"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(UserError, match=r"lists of str; .* a tensor, a tuple or a dict of tensors"):
        prediction_columns([["not", "a", "tensor"]])
    with pytest.raises(UserError, match=r"tuples of NoneType, Tensor; .* a tuple or a dict"):
        prediction_columns([(torch.zeros(2), None)])
    with pytest.raises(UserError, match=r"no row per input \(output_0: 3 rows, output_1: 2 rows"):
        prediction_columns([(torch.zeros(3), torch.zeros(2))])


def test_outputs_padded_to_other_sizes_keep_each_position_in_one_column() -> None:
    """Scores of shape (N, C, L), L padded per batch: a column per (c, l) of the largest L, so
    `output_<k>` means the same position in every row; the positions a batch lacks are empty."""
    short = torch.arange(8.0).reshape(2, 2, 2)  # 2 rows, 2 classes, length 2
    long = torch.arange(100.0, 106.0).reshape(1, 2, 3)  # 1 row, length 3
    table = prediction_columns([short, long])
    assert list(table) == [f"output_{k}" for k in range(6)]
    columns = [
        list(column) if isinstance(column, list) else column.tolist() for column in table.values()
    ]
    rows = [list(row) for row in zip(*columns, strict=True)]
    assert rows == [
        [0.0, 1.0, None, 2.0, 3.0, None],
        [4.0, 5.0, None, 6.0, 7.0, None],
        [100.0, 101.0, 102.0, 103.0, 104.0, 105.0],
    ]


class MultiLabel(torch.nn.Module):
    """A logit per label; ``sigmoid``: sigmoid outputs (probabilities) instead."""

    def __init__(self, sigmoid: bool = False) -> None:
        super().__init__()
        self.sigmoid = sigmoid

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sigmoid() if self.sigmoid else x


def test_a_multi_label_classifier_gets_labels_and_probabilities_by_the_classifier_rule() -> None:
    """A value per label against 0/1 targets of shape (N, L), float or int: per-label
    probabilities (the sigmoid of logits) and 0/1 labels; other targets stay outputs."""
    scores = torch.tensor([[2.0, -1.0, 0.5], [-3.0, 0.2, -0.1]])
    multi_hot = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    assert classifier_of(MultiLabel(), (scores, multi_hot)) == "multilabel logits"
    assert classifier_of(MultiLabel(), (scores, multi_hot.int())) == "multilabel logits"
    assert classifier_of(MultiLabel(True), (scores, multi_hot)) == "multilabel probabilities"
    for how, outputs in (
        ("multilabel logits", scores),
        ("multilabel probabilities", scores.sigmoid()),
    ):
        classes = as_classes(outputs, how)
        assert torch.allclose(classes["prob"], scores.sigmoid())
        assert classes["prediction"].tolist() == [[1, 0, 1], [0, 1, 0]]
    assert list(prediction_columns([scores], "multilabel logits")) == [
        *(f"prediction_{k}" for k in range(3)),
        *(f"prob_{k}" for k in range(3)),
    ]
    assert classifier_of(MultiLabel(), (scores, multi_hot * 0.5)) is None  # not 0/1: outputs
    assert classifier_of(MultiLabel(), (scores, multi_hot[:, :2])) is None  # not a value a label
    one = torch.tensor([[0.3], [-2.0]])  # (N, 1) targets of one logit: a binary classifier
    assert classifier_of(MultiLabel(), (one, torch.tensor([[1.0], [0.0]]))) == "logits"


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


def test_several_test_loaders_get_a_confusion_matrix_each(two_loaders_run: Path) -> None:
    assert (two_loaders_run / "confusion_matrix.png").stat().st_size > 10_000
    assert (two_loaders_run / "confusion_matrix_dataloader_1.png").stat().st_size > 10_000
    assert len(list(two_loaders_run.glob("confusion_matrix*"))) == 2


def test_several_test_loaders_are_predicted_served_and_exported(
    two_loaders_run: Path, tmp_path: Path
) -> None:
    from my_project.machinery.run.export import export
    from my_project.machinery.run.predict import predict, signature_for, split_loaders
    from my_project.machinery.run.serve_api import answer

    team = [
        *DOCS_STYLE_EVAL,
        f"model._target_={__name__}.ClassifierOnTwoTestLoaders",
        f"data._target_={__name__}.TwoTestLoaders",
        f"ckpt_path={two_loaders_run / 'model.ckpt'}",
    ]
    path = predict(compose_config(team, tmp_path / "predict", "predict"))
    rows = read_csv(path)
    assert len(rows) == 89 and list(rows[0])[:4] == ["index", "target", "dataloader", "prediction"]
    assert [int(row["target"]) for row in rows] == split_targets()  # both loaders, in order
    assert [row["dataloader"] for row in rows] == ["0"] * 40 + ["1"] * 49

    cfg = compose_config(team, tmp_path / "serve", "serve")
    model = ClassifierOnTwoTestLoaders.load_from_checkpoint(two_loaders_run / "model.ckpt")
    loaders, batch = split_loaders(cfg, model)
    signature = signature_for(model, loaders, False, "the test split")
    assert signature.shown() == "(N, 16) float32"
    answered = answer(model.eval(), batch[0], False, "logits")
    assert answered["prob"].shape == (len(batch[0]), 4)

    exported = export(compose_config(team, tmp_path / "export", "export"))
    assert exported.is_file()


# -- input_path=: files of new inputs, predicted as the split is ------------------------------


@pytest.fixture(scope="module")
def one_step_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs-style classifier trained one step in this process."""
    import lightning as L

    L.seed_everything(0)
    model, data = LitClassifier(num_features=16, num_classes=4), LitDataModule()
    trainer = L.Trainer(
        max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(model, datamodule=data)
    path = tmp_path_factory.mktemp("one_step") / "model.ckpt"
    trainer.save_checkpoint(path)
    return path


def predict_in_process(checkpoint: Path, out: Path, *overrides: str) -> list[dict[str, str]]:
    from my_project.machinery.run.predict import predict

    cfg = compose_config([*DOCS_STYLE_EVAL, f"ckpt_path={checkpoint}", *overrides], out, "predict")
    return read_csv(predict(cfg))


def split_inputs() -> np.ndarray:
    data = LitDataModule()
    data.setup("test")
    return data.test_set.tensors[0].numpy()


def test_files_of_new_inputs_get_the_columns_and_values_the_split_gets(
    one_step_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .npy file, a .csv file with a header line, one input alone, and a folder of them: the
    split's rows without its targets (a `file` column for a folder), the classifier's rule."""
    inputs = split_inputs()
    split = predict_in_process(one_step_checkpoint, tmp_path / "split")
    without_target = [{k: v for k, v in row.items() if k != "target"} for row in split]
    folder = tmp_path / "inputs"
    folder.mkdir()
    np.save(folder / "a.npy", inputs[:50])
    header = ",".join(f"x{k}" for k in range(16))
    np.savetxt(folder / "b.csv", inputs[50:], delimiter=",", header=header, comments="")
    np.save(tmp_path / "one.npy", inputs[7])

    rows = predict_in_process(
        one_step_checkpoint, tmp_path / "npy", f"input_path={folder / 'a.npy'}"
    )
    assert rows == without_target[:50]
    rows = predict_in_process(
        one_step_checkpoint, tmp_path / "csv", f"input_path={folder / 'b.csv'}"
    )
    assert [{**row, "index": str(int(row["index"]) + 50)} for row in rows] == without_target[50:]
    rows = predict_in_process(
        one_step_checkpoint, tmp_path / "one", f"input_path={tmp_path / 'one.npy'}"
    )
    assert [{**row, "index": "7"} for row in rows] == [without_target[7]]
    assert (
        f"Wrote 1 prediction for input_path={tmp_path / 'one.npy'} to " in capsys.readouterr().out
    )
    rows = predict_in_process(one_step_checkpoint, tmp_path / "dir", f"input_path={folder}")
    assert [row.pop("file") for row in rows] == ["a.npy"] * 50 + ["b.csv"] * 39
    assert rows == without_target


def write(path: Path, content: Any) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, dict):
        np.savez(path, **content)
    else:
        np.save(path, content)
    return path


NON_FINITE = np.ones((5, 16), dtype=np.float32)
NON_FINITE[1, 0], NON_FINITE[3, 5] = np.nan, np.inf


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "x.npy",
            np.zeros((5, 8)),
            r"holds inputs of shape \(5, 8\), where the model takes \(N, 16\) float32",
        ),
        (
            "x.npy",
            NON_FINITE,
            r"NaN or infinite values in 2 of its 5 inputs, rows 1 and 3 \(counting from 0\),",
        ),
        ("x.csv", "1,2\n3,nan\n", r"holds inputs of shape \(2, 2\)"),
        (
            "x.csv",
            ",".join(["1"] * 16) + "\n" + ",".join(["1"] * 15 + [""]) + "\n",
            r"in 1 of its 2 inputs, row 1 \(counting from 0\),",
        ),
        ("x.csv", "a,b\n1,2\n3,x\n", r"row 1, column 1 \(from 0\) is 'x', not a number"),
        (
            "x.npy",
            np.ones((2, 16), dtype=bool),
            r"holds true or false in the inputs, where the model takes numbers \(float32\)",
        ),
        ("x.npy", np.array([[1, 2], [3]], dtype=object), r"holds Python objects, not numbers"),
        ("x.csv", "1,2\n3\n", r"row 1 \(from 0\) has 1 value, row 0 has 2"),
        ("x.npy", b"not numpy", r"is not a file `numpy.save` or `numpy.savez` wrote: numpy can"),
        ("x.npz", b"not numpy", r"only as pickled Python data, and predict.py never unpickles"),
        (
            "x.npz",
            {"a": np.zeros((2, 16)), "b": np.zeros(2)},
            r"holds 2 arrays \(a, b\), but the model takes one",
        ),
        ("x.txt", "1,2\n", r"is not a .npy, .npz or .csv file"),
        ("missing.npy", None, r"does not exist"),
        ("folder", "", r"is a folder without a .npy, .npz or .csv file"),
    ],
)
def test_files_the_model_cannot_take_are_one_paragraph_and_nothing_is_written(
    one_step_checkpoint: Path, tmp_path: Path, name: str, content: Any, message: str
) -> None:
    path = tmp_path / name
    if name == "folder":
        path.mkdir()
    elif content is not None:
        write(path, content)
    with pytest.raises(UserError, match=message):
        predict_in_process(one_step_checkpoint, tmp_path / "run", f"input_path={path}")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_input_path_typed_with_a_plus_reads_that_file_never_the_split(
    checkpoint: Path, tmp_path: Path
) -> None:
    """`+input_path=x.npy`, as Hydra once advised, from the command line: the file is read (its
    rows with NaN or inf named), one paragraph, exit status 2, nothing written."""
    np.save(tmp_path / "x.npy", NON_FINITE)
    result = predict_into(tmp_path / "out", checkpoint, f"+input_path={tmp_path / 'x.npy'}")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    paragraphs = [p for p in result.stderr.strip().split("\n\n") if p.strip()]
    assert len(paragraphs) == 1 and paragraphs[0].startswith("Error: "), result.stderr
    message = " ".join(result.stderr.split())
    assert (
        f"{tmp_path / 'x.npy'} has NaN or infinite values in 2 of its 5 inputs, rows 1 and 3 "
        "(counting from 0),"
    ) in message
    assert not (tmp_path / "out").exists()


# -- per-token outputs: sequences padded per batch to other lengths ---------------------------


class PerTokenScores(SequenceClassifier):
    """A score per token of each sequence, as long as its batch is padded (per-token tagging)."""

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.head(self.embed(batch["tokens"]))[..., 1] * batch["mask"]


ZOO_PADDED = [SEARCH_MACHINERY_CONFIGS, "model=zoo_padded", "data=zoo_padded"]


@pytest.fixture(scope="module")
def padded_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo's classifier of padded sequences trained one step in this process."""
    import lightning as L

    L.seed_everything(0)
    trainer = L.Trainer(
        max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(SequenceClassifier(), datamodule=SequenceData())
    path = tmp_path_factory.mktemp("padded") / "model.ckpt"
    trainer.save_checkpoint(path)
    return path


def predict_padded(checkpoint: Path, out: Path, *overrides: str) -> list[dict[str, str]]:
    from my_project.machinery.run.predict import predict

    model = f"model._target_={__name__}.PerTokenScores"
    cfg = compose_config(
        [*ZOO_PADDED, model, f"ckpt_path={checkpoint}", *overrides], out, "predict"
    )
    return read_csv(predict(cfg))


def test_per_token_outputs_of_batches_padded_to_other_lengths_leave_the_rest_empty(
    padded_checkpoint: Path, tmp_path: Path
) -> None:
    """The split's batches, then two files, padded to other lengths: a column per position
    of the longest, each row's values where its batch had them, empty cells past them."""
    from torch.utils.data import DataLoader

    from .zoo.padded import pad_collate

    model = PerTokenScores.load_from_checkpoint(padded_checkpoint).eval()
    data = SequenceData()
    data.setup("test")
    batches = list(DataLoader(data.test_set, batch_size=3, collate_fn=pad_collate))
    lengths = [batch["tokens"].shape[1] for batch in batches]
    assert lengths[0] != lengths[1]  # padded to other lengths
    with torch.no_grad():
        expected = [row.tolist() for b in batches for row in model.predict_step(b, 0)]
    longest = max(lengths)

    rows = predict_padded(padded_checkpoint, tmp_path / "split", "batch_size=3")
    assert list(rows[0]) == ["index", *(f"output_{k}" for k in range(longest))]
    for row, want in zip(rows, expected, strict=True):
        cells = [row[f"output_{k}"] for k in range(longest)]
        assert cells[len(want) :] == [""] * (longest - len(want))
        assert [float(c) for c in cells[: len(want)]] == pytest.approx(want, abs=1e-6)

    folder = tmp_path / "inputs"
    folder.mkdir()
    for name, batch in (("a.npz", batches[0]), ("b.npz", batches[1])):
        np.savez(folder / name, tokens=batch["tokens"].numpy(), mask=batch["mask"].numpy())
    rows = predict_padded(
        padded_checkpoint, tmp_path / "files", f"input_path={folder}", "batch_size=3"
    )
    width = max(lengths[:2])
    assert [row.pop("file") for row in rows] == ["a.npz"] * 3 + ["b.npz"] * 3
    assert [list(row.values())[1:] for row in rows] == [
        [f"{v:.6f}" for v in want] + [""] * (width - len(want)) for want in expected[:6]
    ]


def test_a_value_of_a_file_the_model_refuses_is_one_paragraph_naming_the_file_and_rows(
    padded_checkpoint: Path, tmp_path: Path
) -> None:
    """Token ids past the vocabulary fit every check of shapes and dtypes; the model's
    embedding refuses them: the file and the rows, what to fix, nothing written."""
    data = SequenceData()
    data.setup("test")
    batch = next(iter(data.test_dataloader()))
    tokens = batch["tokens"].numpy().copy()
    tokens[2, 0], tokens[5, 1] = 12, 40  # the vocabulary holds 0 to 11
    path = tmp_path / "x.npz"
    np.savez(path, tokens=tokens, mask=batch["mask"].numpy())
    with pytest.raises(UserError) as refused:
        predict_padded(padded_checkpoint, tmp_path / "run", f"input_path={path}")
    assert str(refused.value).startswith(
        f"{path} holds inputs PerTokenScores cannot take, rows 2 and 5 (counting from 0): "
        "IndexError: index out of range in self. predict.py passes a file's values to the model "
        "as they are"
    )
    assert not (tmp_path / "run" / "predictions.csv").exists()
