"""Export: `python export.py ckpt_path=PATH format=onnx` writes the checkpoint's ``forward``
as ONNX (Lightning's ``to_onnx``, any batch size) into the run directory once ONNX Runtime
matches PyTorch on every input of the data's ``split`` (``atol + rtol * |PyTorch's|``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ..errors import UserError, require_extra
from . import entry
from .boundary import describe
from .checkpoint_config import checkpoint_run


def export(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, export it, check the file; return its path."""
    require_extra(("onnx", "onnxscript", "onnxruntime"), "export", "export.py format=onnx")
    import torch

    from ..config import print_config_tree
    from .predict import inputs_of, split_loaders
    from .serve import signature_of
    from .serve_api import shown

    if cfg.format != "onnx":  # (Lightning's other format, TorchScript, is deprecated)
        raise UserError(f"format={cfg.format} is not one export.py writes; pass format=onnx.")
    _, config, model = checkpoint_run(cfg)  # check, build
    loaders, _ = split_loaders(cfg, model)
    inputs = torch.cat([inputs_of(batch) for loader in loaders for batch in loader])
    shape, dtype = signature_of(inputs, type(model).__name__)
    print_config_tree(config)
    with tempfile.TemporaryDirectory(prefix="export-") as scratch:  # run
        partial = Path(scratch) / "model.onnx"
        export_onnx(model, torch.cat([inputs[:1], inputs[-1:]]), partial)  # two: any batch size
        difference = check_with_onnxruntime(partial, model, inputs, cfg.atol, cfg.rtol)
        output_dir = Path(cfg.paths.output_dir)  # record what came out
        output_dir.mkdir(parents=True, exist_ok=True)
        print_config_tree(config, save_to=output_dir / "config_tree.log")
        path = output_dir / cfg.output_file
        shutil.move(partial, path)
    print(
        f"Wrote {path}: {type(model).__name__}.forward as ONNX, input `input` shaped "
        f"{shown(shape, dtype).replace('(N,', '(batch,')} (any batch size); ONNX Runtime "
        f"matches PyTorch on the {len(inputs)} inputs of the {cfg.split} split of its data, "
        f"max abs difference {difference:.3g}."
    )
    return path


def export_onnx(model: Any, sample: Any, path: Path) -> None:
    """``model.forward`` to ``path`` (one file), traced on ``sample``, any batch size, its
    progress lines and warnings off the screen; what the exporter cannot take is a
    :class:`UserError` in its words (the innermost error)."""
    import torch

    with torch.no_grad():
        names = {"output_names": ["output"]} if isinstance(model(sample), torch.Tensor) else {}
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            logging.disable(logging.WARNING)
            model.to_onnx(
                path,
                sample,
                dynamo=True,
                external_data=False,
                verbose=False,
                input_names=["input"],
                dynamic_shapes=({0: torch.export.Dim("batch")},),
                **names,
            )
    except Exception as error:
        inner: BaseException = error
        while inner.__cause__ is not None:
            inner = inner.__cause__
        raise UserError(
            f"{type(model).__name__} cannot be exported to ONNX by torch's exporter "
            f"({describe(inner)}) Write forward without what it names (e.g. torch.where for a "
            "branch on tensor values), or leave that step out of forward, and export again."
        ) from error
    finally:
        logging.disable(logging.NOTSET)


def check_with_onnxruntime(path: Path, model: Any, inputs: Any, atol: float, rtol: float) -> float:
    """Run the file with ONNX Runtime on ``inputs``; return the largest absolute difference
    from PyTorch's outputs, or a :class:`UserError` if one is beyond the tolerance."""
    import numpy as np
    import onnxruntime
    import torch
    from lightning_utilities.core.apply_func import apply_to_collection

    expected: list[np.ndarray] = []  # forward's tensors, in the order the ONNX file lists them
    with torch.no_grad():
        apply_to_collection(model(inputs), torch.Tensor, lambda t: expected.append(t.numpy()))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": inputs.numpy()})
    worst, beyond = 0.0, len(got) != len(expected)
    for have, want in zip(got, expected, strict=False):
        difference = np.abs(np.asarray(have, dtype=np.float64) - want.astype(np.float64))
        worst = max(worst, float(difference.max(initial=0.0)))
        beyond |= bool((difference > atol + rtol * np.abs(want)).any())
    if beyond or not np.isfinite(worst):
        raise UserError(
            f"ONNX Runtime's outputs differ from PyTorch's by up to {worst:.3g} on the test "
            f"inputs ({len(got)} outputs for {len(expected)}), more than atol={atol} + "
            f"rtol={rtol} times PyTorch's; nothing was written. If that is close enough for "
            "you, export again with larger `atol=` and `rtol=`."
        )
    return worst


def main() -> None:
    """Console-script entry point (`my-project-export`)."""
    entry.main("export", export)


if __name__ == "__main__":
    main()
