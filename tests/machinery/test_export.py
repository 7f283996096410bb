"""`python export.py ckpt_path=... format=onnx` for a team's module: an ONNX file of its
forward, any batch size, checked with ONNX Runtime against PyTorch on the test split; a module
the exporter cannot take stops with one paragraph in the exporter's words, and writes nothing."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
import torch

from my_project.machinery.errors import UserError
from my_project.machinery.run.export import (
    Call,
    check_with_onnxruntime,
    export,
    export_onnx,
    forward_call,
)

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, DOCS_STYLE_EVAL, FAST, compose_config, run_entry


class WithZeta(LitClassifier):
    """An operation torch's exporter has no ONNX translation for."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.net(x)
        return torch.special.zeta(logits.abs() + 2, torch.ones_like(logits))


class WithABranchOnValues(LitClassifier):
    """Control flow on tensor values, which torch.export cannot trace."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.net(x)
        if logits.sum() > 0:
            return logits
        return -logits


def call_of(model: LitClassifier, inputs: torch.Tensor) -> Call:
    """forward's call for a batch ``(inputs, labels)`` (no predict_step of its own)."""
    return forward_call(model, (inputs, torch.zeros(len(inputs))), False, "the test split")


def split_inputs() -> torch.Tensor:
    data = LitDataModule()
    data.setup("test")
    return data.test_set.tensors[0]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("export_train")
    result = run_entry("train", *DOCS_STYLE, *FAST, "logger=none", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return next((run_dir / "checkpoints").glob("epoch_*.ckpt"))


@pytest.mark.slow
def test_export_writes_an_onnx_file_that_matches_pytorch_as_readme_writes_it(
    checkpoint: Path, tmp_path: Path
) -> None:
    result = run_entry(
        "export",
        *DOCS_STYLE_EVAL,
        f"ckpt_path={checkpoint}",
        "format=onnx",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    path = tmp_path / "model.onnx"
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"Wrote {re.escape(str(path))}: LitClassifier\.forward as ONNX, input `input` shaped "
        r"\(batch, 16\) float32 \(any batch size\); ONNX Runtime matches PyTorch on the 89 "
        r"inputs of the test split of its data, max abs difference [0-9.e+-]+\.",
        last,
    ), last
    printed = float(last.rsplit("max abs difference ", 1)[1].rstrip("."))
    assert printed <= 1e-5
    print(f"\ndocs-style module: ONNX max abs difference {printed:.3g} on 89 test inputs")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".hydra",
        "config_tree.log",
        "export.log",
        "model.onnx",
    ]  # one file, no external data beside it

    model = LitClassifier.load_from_checkpoint(checkpoint).eval()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape[1:], i.type) for i in session.get_inputs()] == [
        ("input", [16], "tensor(float)")
    ]
    inputs = split_inputs()
    for batch in (inputs, inputs[:1], inputs[:5]):
        with torch.no_grad():
            expected = model(batch).numpy()
        (got,) = session.run(None, {"input": batch.numpy()})
        assert np.abs(got - expected).max() <= 1e-5


@pytest.mark.slow
def test_a_module_the_exporter_cannot_take_is_one_paragraph_in_the_exporters_words(
    checkpoint: Path, tmp_path: Path
) -> None:
    result = run_entry(
        "export",
        *DOCS_STYLE_EVAL,
        f"model._target_={__name__}.WithZeta",
        f"ckpt_path={checkpoint}",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "torchvision" not in result.stderr
    paragraphs = [p for p in result.stderr.strip().split("\n\n") if p.strip()]
    assert len(paragraphs) == 1 and paragraphs[0].startswith("Error: "), result.stderr
    message = " ".join(result.stderr.split())
    line = inspect.getsourcelines(WithZeta.forward)[1] + 2  # the line calling torch.special.zeta
    assert (
        "WithZeta cannot be exported to ONNX by torch's exporter: at "
        f"tests/machinery/test_export.py:{line} in forward, `return torch.special.zeta("
    ) in message
    assert "No ONNX function found for <OpOverload(op='prims.zeta'" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_control_flow_on_tensor_values_is_refused_in_torch_exports_words(tmp_path: Path) -> None:
    model = WithABranchOnValues(num_features=16, num_classes=4).eval()
    with pytest.raises(UserError) as raised:
        export_onnx(model, [call_of(model, torch.randn(2, 16))], tmp_path / "model.onnx")
    message = str(raised.value)
    line = inspect.getsourcelines(WithABranchOnValues.forward)[1] + 2  # `if logits.sum() > 0:`
    assert message.startswith(
        "WithABranchOnValues cannot be exported to ONNX by torch's exporter: at "
        f"tests/machinery/test_export.py:{line} in forward, `if logits.sum() > 0:`: "
    )
    assert "data-dependent expression" in message and "torch.where" in message
    assert "site-packages" not in message and "_export/" not in message  # no line inside torch
    assert not (tmp_path / "model.onnx").exists()


def test_outputs_beyond_the_tolerance_are_an_error(tmp_path: Path) -> None:
    torch.manual_seed(0)
    exported, other = LitClassifier(16, 4).eval(), LitClassifier(16, 4).eval()
    path = tmp_path / "model.onnx"
    export_onnx(exported, [call_of(exported, torch.randn(2, 16))], path)
    calls = [call_of(exported, split_inputs())]
    difference, shown = check_with_onnxruntime(path, exported, calls, atol=1e-5, rtol=1e-4)
    assert difference <= 1e-5 and shown == "input `input` shaped (batch, 16) float32"
    with pytest.raises(UserError, match=r"differ from PyTorch's by up to .* nothing was written"):
        check_with_onnxruntime(path, other, calls, atol=1e-5, rtol=1e-4)


def test_torchscript_is_not_a_format(tmp_path: Path) -> None:
    overrides = [*DOCS_STYLE_EVAL, "ckpt_path=x.ckpt", "format=torchscript"]
    with pytest.raises(UserError, match=r"format=torchscript is not one .* pass format=onnx"):
        export(compose_config(overrides, tmp_path, "export"))


def test_named_inputs_are_exported_by_name_with_any_batch_size_and_length(tmp_path: Path) -> None:
    """A dict batch and the module's own predict_step (`self(batch["tokens"], batch["mask"])`):
    forward's two tensors as inputs named as its parameters, the padded length (which the
    data's batches vary in) left free, so batches padded to other lengths run too."""
    from .zoo.padded import SequenceClassifier, SequenceData

    torch.manual_seed(0)
    model, data = SequenceClassifier().eval(), SequenceData(batch_size=4)  # padded to 8, then 9
    data.setup("test")
    batches = list(data.test_dataloader())
    calls = [forward_call(model, batch, True, "the test split") for batch in batches]
    assert list(calls[0].tensors) == ["tokens", "mask"] and calls[0].rows == 4
    path = tmp_path / "model.onnx"
    export_onnx(model, calls, path)
    difference, shown = check_with_onnxruntime(path, model, calls, atol=1e-5, rtol=1e-4)
    assert (
        difference <= 1e-5
        and shown == "inputs `tokens` (batch, length) int64, `mask` (batch, length) float32"
    )
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tokens = torch.tensor([[3, 4, 0], [5, 6, 7]])  # 2 sequences padded to 3
    mask = (tokens != 0).float()
    (got,) = session.run(None, {"tokens": tokens.numpy(), "mask": mask.numpy()})
    with torch.no_grad():
        assert np.abs(got - model(tokens, mask).numpy()).max() <= 1e-5


def test_per_token_outputs_are_exported_with_the_length_free_and_named(tmp_path: Path) -> None:
    """A tag's scores per token (a GRU over the padded sequences): the file's inputs and
    outputs say `batch` and `length`, never torch's symbols nor the traced length, and ONNX
    Runtime runs two other lengths as PyTorch does."""
    from .zoo.padded import SequenceClassifier, SequenceData

    class TagsPerToken(SequenceClassifier):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = torch.nn.GRU(16, 8, batch_first=True, bidirectional=True)
            self.tags = torch.nn.Linear(16, 3)

        def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
            states, _ = self.rnn(self.embed(tokens))
            return {"tags": self.tags(states) * mask.unsqueeze(-1), "real": tokens != 0}

        def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> Any:
            return self(batch["tokens"], batch["mask"])

    torch.manual_seed(0)
    model, data = TagsPerToken().eval(), SequenceData(batch_size=4)
    data.setup("test")
    calls = [forward_call(model, b, True, "the test split") for b in data.test_dataloader()]
    path = tmp_path / "model.onnx"
    export_onnx(model, calls, path)
    _, shown = check_with_onnxruntime(path, model, calls, atol=1e-5, rtol=1e-4)
    assert shown == "inputs `tokens` (batch, length) int64, `mask` (batch, length) float32"
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(o.name, o.shape) for o in session.get_outputs()] == [
        ("tags", ["batch", "length", 3]),
        ("real", ["batch", "length"]),
    ]
    for length in (3, 12):
        tokens = torch.randint(1, 12, (2, length))
        mask = torch.ones(2, length)
        tags, _ = session.run(None, {"tokens": tokens.numpy(), "mask": mask.numpy()})
        with torch.no_grad():
            expected = model(tokens, mask)["tags"].numpy()
        assert tags.shape == (2, length, 3) and np.abs(tags - expected).max() <= 1e-5


class FeaturesAndACategory(torch.nn.Module):
    """A dict batch of fixed widths: 16 features and a category id per sample."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(5, 4)
        self.head = torch.nn.Linear(20, 3)

    def forward(self, x: torch.Tensor, cat: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([x, self.embed(cat)], dim=1))

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch["x"], batch["cat"])


def features_and_categories() -> list[dict[str, torch.Tensor]]:
    """Batches of 8, 8 and 5 samples, each `x` of 16 features."""
    generator = torch.Generator().manual_seed(0)
    return [
        {
            "x": torch.randn(n, 16, generator=generator),
            "cat": torch.randint(0, 5, (n,), generator=generator),
            "y": torch.zeros(n),
        }
        for n in (8, 8, 5)
    ]


def test_sizes_the_datas_batches_never_vary_in_are_fixed_in_the_file(tmp_path: Path) -> None:
    """16 features in every batch: the file takes (batch, 16), and ONNX Runtime refuses 10
    features at its inputs, rather than a matrix product failing deep inside."""
    torch.manual_seed(0)
    model = FeaturesAndACategory().eval()
    calls = [forward_call(model, b, True, "the test split") for b in features_and_categories()]
    path = tmp_path / "model.onnx"
    export_onnx(model, calls, path)
    difference, shown = check_with_onnxruntime(path, model, calls, atol=1e-5, rtol=1e-4)
    assert difference <= 1e-5 and shown == "inputs `x` (batch, 16) float32, `cat` (batch,) int64"
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape) for i in session.get_inputs()] == [
        ("x", ["batch", 16]),
        ("cat", ["batch"]),
    ]
    assert [(o.name, o.shape) for o in session.get_outputs()] == [("output", ["batch", 3])]
    cat = np.zeros(2, dtype=np.int64)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument) as refused:
        session.run(None, {"x": np.zeros((2, 10), dtype=np.float32), "cat": cat})
    assert "Got invalid dimensions for input: x" in str(refused.value)


@pytest.mark.parametrize(
    ("b_lengths", "names"),
    [
        ((5, 3), ["batch", "length", "batch", "length", "batch", 4, "c_dim2"]),
        ((6, 3), ["batch", "a_length", "batch", "b_length", "batch", 4, "c_dim2"]),
    ],
)
def test_free_sizes_are_named_length_where_the_datas_are_equal_else_by_input(
    tmp_path: Path, b_lengths: tuple[int, int], names: list[Any]
) -> None:
    """Padded lengths equal in every batch of the data share `length`; others are named after
    their input; the outputs take the names shape inference carries to them."""
    import onnx
    from onnx import TensorProto, helper

    from my_project.machinery.run.export import name_sizes

    shapes = {"a": ["batch", "s1"], "b": ["batch", "s2"], "c": ["batch", 4, "s3"]}
    graph = helper.make_graph(
        [helper.make_node("Identity", [name], [f"{name}_out"]) for name in shapes],
        "free",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in shapes.items()],
        [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, None) for n in shapes],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    calls = [
        Call(
            (),
            {},
            tensors={"a": torch.zeros(2, a), "b": torch.zeros(2, b), "c": torch.zeros(2, 4, 3)},
        )
        for a, b in zip((5, 3), b_lengths, strict=True)
    ]
    name_sizes(path, calls)
    model = onnx.load(str(path))
    sizes = [
        size.dim_param or size.dim_value
        for value in model.graph.input
        for size in value.type.tensor_type.shape.dim
    ]
    assert sizes == names
    outputs = [
        size.dim_param or size.dim_value
        for value in model.graph.output
        for size in value.type.tensor_type.shape.dim
    ]
    assert outputs == names


def test_a_tuple_output_is_exported_an_output_each(tmp_path: Path) -> None:
    from .zoo.heteroscedastic import HeteroscedasticRegressor

    model = HeteroscedasticRegressor().eval()
    path = tmp_path / "model.onnx"
    calls = [call_of(model, torch.randn(8, 6))]
    export_onnx(model, calls, path)
    check_with_onnxruntime(path, model, calls, atol=1e-5, rtol=1e-4)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["output_0", "output_1"]


def test_pack_padded_sequence_is_refused_naming_the_line_and_the_module_it_calls(
    tmp_path: Path,
) -> None:
    from .zoo.packed import PackedSequenceClassifier, TokenData

    model, data = PackedSequenceClassifier().eval(), TokenData()
    data.setup("test")
    calls = [forward_call(model, batch, True, "the test split") for batch in data.test_dataloader()]
    assert list(calls[0].tensors) == ["input_ids", "lengths"]
    with pytest.raises(UserError) as raised:
        export_onnx(model, calls, tmp_path / "model.onnx")
    line = next(
        n
        for n, text in enumerate(inspect.getsource(inspect.getmodule(model)).splitlines(), 1)
        if "self.rnn(packed)" in text
    )
    assert str(raised.value).startswith(
        "PackedSequenceClassifier cannot be exported to ONNX by torch's exporter: at "
        f"tests/machinery/zoo/packed.py:{line} in forward, `_, hidden = self.rnn(packed)` "
        "(GRU.forward): "
    )
    assert not (tmp_path / "model.onnx").exists()


def test_a_forward_of_the_dict_batch_is_exported_an_input_per_key(tmp_path: Path) -> None:
    """No predict_step: Lightning's calls `self(batch)`, forward reads the dict's tensors."""
    import lightning as L

    from .zoo.padded import SequenceClassifier, SequenceData

    class ForwardOfTheBatch(SequenceClassifier):
        predict_step = L.LightningModule.predict_step

        def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return super().forward(batch["tokens"], batch["mask"])

    model, data = ForwardOfTheBatch().eval(), SequenceData(batch_size=4)
    data.setup("test")
    calls = [forward_call(model, b, False, "the test split") for b in data.test_dataloader()]
    assert list(calls[0].tensors) == ["tokens", "mask", "label"]
    export_onnx(model, calls, tmp_path / "model.onnx")
    difference, shown = check_with_onnxruntime(tmp_path / "model.onnx", model, calls, 1e-5, 1e-4)
    assert difference <= 1e-5 and shown.startswith("inputs `tokens` (batch, length) int64, `mask` ")


def test_a_predict_step_calling_self_forward_gives_forwards_arguments() -> None:
    from .zoo.padded import SequenceClassifier, SequenceData

    class CallsForward(SequenceClassifier):
        def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            return self.forward(batch["tokens"], batch["mask"]).softmax(-1)

    model, data = CallsForward().eval(), SequenceData()
    data.setup("test")
    batch = next(iter(data.test_dataloader()))
    call = forward_call(model, batch, True, "the test split")
    assert list(call.tensors) == ["tokens", "mask"]
    assert torch.equal(call.tensors["tokens"], batch["tokens"])
    assert "forward" not in vars(model)  # the module as it was
