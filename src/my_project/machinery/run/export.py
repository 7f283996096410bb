"""Export: `python export.py ckpt_path=PATH format=onnx` writes the model as an ONNX file.

The model and data are those of the run that wrote the checkpoint (`checkpoint_config.py`).
Its ``forward`` is exported with Lightning's ``to_onnx`` (torch's exporter, ``dynamo=True``)
from two inputs of the data's ``split`` (the input's shape and dtype as the data gives them;
any batch size), then ONNX Runtime runs the file on every input of that split and its outputs
are compared with PyTorch's: the largest difference is printed, and must be within ``atol +
rtol * |PyTorch's|``. Only then is the file put in place (``model.onnx`` in the run
directory), so a failed export or check leaves nothing. A module the exporter cannot take
stops with one paragraph naming the operation. (TorchScript, deprecated in Lightning 2.6, is
left out.)
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ..errors import UserError, require_extra
from . import entry
from .checkpoint_config import use_checkpoint_run

FORMATS = ("onnx",)


def export(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, export it, check the file; return its path."""
    require_extra(("onnx", "onnxscript", "onnxruntime"), "export", "export.py format=onnx")
    import torch

    from .. import preflight
    from ..config import print_config_tree
    from . import build
    from .input_signature import batch_inputs, signature_of
    from .predict import split_loader

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    check_format(cfg.format)
    config = build.masked_config(cfg)  # build
    model = build.load_model(cfg.model._target_, ckpt_path).eval()
    batches = [batch_inputs(batch) for batch in split_loader(cfg, model)]
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
    if name in FORMATS:
        return
    why = " (TorchScript is deprecated in Lightning 2.6)" if "script" in str(name).lower() else ""
    raise UserError(f"format={name} is not one export.py writes{why}; pass format=onnx.")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The exporter's progress lines and warnings (e.g. that torchvision is not installed,
    for its operators) kept off the screen: what matters is said once, afterwards."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def export_onnx(model: Any, sample: Any, path: Path) -> None:
    """``model.forward`` to ``path`` (one file), traced on ``sample``, any batch size; a
    :class:`UserError` naming what the exporter could not take."""
    import torch

    with torch.no_grad():
        output = model(sample)
    names = {"output_names": ["output"]} if isinstance(output, torch.Tensor) else {}
    try:
        with quiet():
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


def unexportable(model: Any, error: BaseException) -> str:
    """One paragraph: what in ``model`` the exporter could not take, and what to do."""
    name = type(model).__name__
    chain = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    innermost = chain[-1]
    reason = str(innermost).strip().splitlines()[0][:200] if str(innermost).strip() else ""
    for link in chain:
        found = re.search(r"OpOverload\(op='([^']+)'", str(link))
        if found:
            return (
                f"{name} cannot be exported to ONNX: torch's exporter has no ONNX translation "
                f"for the operation `{found[1]}` in its forward. Compute that step with other "
                "operations, or move it out of forward (e.g. into predict_step), and export again."
            )
    where = _user_code(model, chain)
    return (
        f"{name} cannot be exported to ONNX: torch.export cannot trace "
        f"{where or 'its forward'} ({type(innermost).__name__}: {reason}). Write forward without "
        "it (e.g. torch.where for a branch on tensor values), or leave the step out of forward, "
        "and export again."
    )


def _user_code(model: Any, chain: list[BaseException]) -> str:
    """The module's own line the export failed in, if it shows in a traceback."""
    try:
        source = inspect.getsourcefile(type(model))
    except TypeError:
        return ""
    for link in reversed(chain):
        frames = [f for f in traceback.extract_tb(link.__traceback__) if f.filename == source]
        if frames:
            frame = frames[-1]
            return f"`{frame.line}` ({Path(frame.filename).name}:{frame.lineno}, in {frame.name})"
    return ""


def check_with_onnxruntime(path: Path, model: Any, inputs: Any, atol: float, rtol: float) -> float:
    """Run the file with ONNX Runtime on ``inputs``; return the largest absolute difference
    from PyTorch's outputs, or a :class:`UserError` if one is beyond the tolerance."""
    import numpy as np
    import onnxruntime
    import torch

    with torch.no_grad():
        expected = [t.detach().cpu().numpy() for t in _leaves(model(inputs))]
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


def _leaves(output: Any) -> list[Any]:
    """The tensors of ``forward``'s output in the order the ONNX file lists them."""
    import torch.utils._pytree as pytree

    return [leaf for leaf in pytree.tree_leaves(output) if hasattr(leaf, "numpy")]


def main() -> None:
    """Console-script entry point (`my-project-export`)."""
    entry.main("export", export)


if __name__ == "__main__":
    main()
