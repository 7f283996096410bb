"""Export: `python export.py ckpt_path=PATH format=onnx` writes the checkpoint's ``forward``
as ONNX (Lightning's ``to_onnx``, torch's exporter, any batch size), then ONNX Runtime runs it
on every input of the data's ``split``: within ``atol + rtol * |PyTorch's|`` of PyTorch's, it
is put in the run directory, else nothing is. What the exporter cannot take is one paragraph.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import re
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ..errors import UserError, require_extra
from . import entry
from .checkpoint_config import use_checkpoint_run


def export(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, export it, check the file; return its path."""
    require_extra(("onnx", "onnxscript", "onnxruntime"), "export", "export.py format=onnx")
    import torch

    from .. import preflight
    from ..config import print_config_tree
    from . import build
    from .predict import inputs_of, split_loaders
    from .serve import signature_of

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    check_format(cfg.format)
    config = build.masked_config(cfg)  # build
    model = build.load_model(cfg.model._target_, ckpt_path).eval()
    batches = [inputs_of(batch) for loader in split_loaders(cfg, model) for batch in loader]
    source = f"the {cfg.split} split of its data"
    if not batches:
        raise UserError(f"The {source} is empty: pick another `split=` (train, val or test).")
    signature = signature_of(batches[0], source, type(model).__name__)
    inputs = torch.cat(batches)
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
        f"{signature.describe().replace('(N,', '(batch,')} (any batch size); ONNX Runtime "
        f"matches PyTorch on the {len(inputs)} inputs of {source}, max abs difference "
        f"{difference:.3g}."
    )
    return path


def check_format(name: str) -> None:
    if name == "onnx":
        return
    why = " (TorchScript is deprecated in Lightning 2.6)" if "script" in str(name).lower() else ""
    raise UserError(f"format={name} is not one export.py writes{why}; pass format=onnx.")


def export_onnx(model: Any, sample: Any, path: Path) -> None:
    """``model.forward`` to ``path`` (one file), traced on ``sample``, any batch size; a
    :class:`UserError` naming what the exporter could not take. The exporter's progress lines
    and warnings stay off the screen: what matters is said once, afterwards."""
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
        raise UserError(unexportable(model, error)) from error
    finally:
        logging.disable(logging.NOTSET)


def unexportable(model: Any, error: BaseException) -> str:
    """One paragraph: the operation the exporter has no translation for, or the module's own
    line torch.export could not trace, and what to do."""
    name = type(model).__name__
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    for link in chain:
        if found := re.search(r"OpOverload\(op='([^']+)'", str(link)):
            return (
                f"{name} cannot be exported to ONNX: torch's exporter has no ONNX translation "
                f"for the operation `{found[1]}` in its forward. Compute that step with other "
                "operations, or move it out of forward (e.g. into predict_step), and export again."
            )
    where = "its forward"
    with contextlib.suppress(TypeError):
        source = inspect.getsourcefile(type(model))
        frames = [f for link in chain for f in traceback.extract_tb(link.__traceback__)]
        mine = [f for f in frames if f.filename == source]
        if mine:
            line = mine[-1]
            where = f"`{line.line}` ({Path(line.filename).name}:{line.lineno}, in {line.name})"
    innermost = str(chain[-1]).strip()
    reason = innermost.splitlines()[0][:200] if innermost else ""
    return (
        f"{name} cannot be exported to ONNX: torch.export cannot trace {where} "
        f"({type(chain[-1]).__name__}: {reason}). Write forward without it (e.g. torch.where "
        "for a branch on tensor values), or leave the step out of forward, and export again."
    )


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
    if len(got) != len(expected):
        raise UserError(
            f"The ONNX file has {len(got)} outputs where {type(model).__name__}.forward returns "
            f"{len(expected)} tensors; the export did not keep its outputs, and nothing was written."
        )
    worst, beyond = 0.0, False
    for have, want in zip(got, expected, strict=True):
        difference = np.abs(np.asarray(have, dtype=np.float64) - want.astype(np.float64))
        worst = max(worst, float(difference.max(initial=0.0)))
        beyond |= bool((difference > atol + rtol * np.abs(want)).any())
    if beyond or not np.isfinite(worst):
        raise UserError(
            f"ONNX Runtime's outputs differ from PyTorch's by up to {worst:.3g} on the test "
            f"inputs, more than atol={atol} + rtol={rtol} times PyTorch's; nothing was written. "
            "If that is close enough for you, export again with larger `atol=` and `rtol=`."
        )
    return worst


def main() -> None:
    """Console-script entry point (`my-project-export`)."""
    entry.main("export", export)


if __name__ == "__main__":
    main()
