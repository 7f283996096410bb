"""`python export.py ckpt_path=... format=onnx` for a team's module: an ONNX file of its
forward, any batch size, checked with ONNX Runtime against PyTorch on the test split; a module
the exporter cannot take stops with one paragraph in the exporter's words, and writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch

from my_project.machinery.errors import UserError
from my_project.machinery.run.export import check_with_onnxruntime, export, export_onnx

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
    assert "WithZeta cannot be exported to ONNX by torch's exporter (" in message
    assert "No ONNX function found for <OpOverload(op='prims.zeta'" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_control_flow_on_tensor_values_is_refused_in_torch_exports_words(tmp_path: Path) -> None:
    model = WithABranchOnValues(num_features=16, num_classes=4).eval()
    with pytest.raises(UserError) as raised:
        export_onnx(model, torch.randn(2, 16), tmp_path / "model.onnx")
    message = str(raised.value)
    assert message.startswith("WithABranchOnValues cannot be exported to ONNX by torch's exporter")
    assert "data-dependent expression" in message and "torch.where" in message
    assert not (tmp_path / "model.onnx").exists()


def test_outputs_beyond_the_tolerance_are_an_error(tmp_path: Path) -> None:
    torch.manual_seed(0)
    exported, other = LitClassifier(16, 4).eval(), LitClassifier(16, 4).eval()
    path = tmp_path / "model.onnx"
    export_onnx(exported, torch.randn(2, 16), path)
    inputs = split_inputs()
    assert check_with_onnxruntime(path, exported, inputs, atol=1e-5, rtol=1e-4) <= 1e-5
    with pytest.raises(UserError, match=r"differ from PyTorch's by up to .* nothing was written"):
        check_with_onnxruntime(path, other, inputs, atol=1e-5, rtol=1e-4)


def test_torchscript_is_not_a_format(tmp_path: Path) -> None:
    overrides = [*DOCS_STYLE_EVAL, "ckpt_path=x.ckpt", "format=torchscript"]
    with pytest.raises(UserError, match=r"format=torchscript is not one .* pass format=onnx"):
        export(compose_config(overrides, tmp_path, "export"))
