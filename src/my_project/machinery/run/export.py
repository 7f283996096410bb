"""Export: `python export.py ckpt_path=PATH format=onnx` writes the checkpoint's ``forward`` as
ONNX (``torch.export``, then torch's ONNX exporter) into the run directory once ONNX Runtime
matches PyTorch on every batch of the data's ``split`` (``atol + rtol * |PyTorch's|``).

``forward`` is exported with what the module passes it: the batch's inputs, or what its own
``predict_step`` calls ``self(...)`` with (``self(batch["input_ids"], batch["lengths"])``), one
input per tensor argument, named as forward's parameters (``input`` for one), any batch size
(and any size past it that the data's batches vary in, where the model allows it);
its outputs named as serve.py names them (``output``, ``output_<k>`` of a tuple, a dict's keys).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from ..errors import UserError, causes, require_extra
from . import entry
from .boundary import describe, teams_bug
from .checkpoint_config import checkpoint_run
from .inputs import counted
from .team_line import team_line

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class Call:
    """What the module passed ``forward`` for one batch of the data: the arguments (as given,
    and by forward's parameter names), its tensors by the file's input names, and the number
    of samples."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    arguments: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    rows: int = 0


def export(cfg: DictConfig) -> Path:
    """Load the checkpoint's model, export it, check the file; return its path."""
    require_extra(("onnx", "onnxscript", "onnxruntime"), "export", "export.py format=onnx")
    from lightning.pytorch.utilities.model_helpers import is_overridden

    from ..config import print_config_tree
    from .predict import split_loaders

    if cfg.format != "onnx":  # (Lightning's other format, TorchScript, is deprecated)
        raise UserError(f"format={cfg.format} is not one export.py writes; pass format=onnx.")
    _, config, model = checkpoint_run(cfg)  # check, build
    loaders, _ = split_loaders(cfg, model)
    own = is_overridden("predict_step", model)
    source = f"the {cfg.split} split"
    calls = [forward_call(model, batch, own, source) for loader in loaders for batch in loader]
    entry.announce_run_dir()  # every check passed
    print_config_tree(config)
    with tempfile.TemporaryDirectory(prefix="export-") as scratch:  # run
        partial = Path(scratch) / "model.onnx"
        export_onnx(model, calls, partial)
        difference, shown = check_with_onnxruntime(partial, model, calls, cfg.atol, cfg.rtol)
        output_dir = Path(cfg.paths.output_dir)  # record what came out
        output_dir.mkdir(parents=True, exist_ok=True)
        print_config_tree(config, save_to=output_dir / "config_tree.log")
        path = output_dir / cfg.output_file
        shutil.move(partial, path)
    print(
        f"Wrote {path}: {type(model).__name__}.forward as ONNX, {shown} (any batch size); ONNX "
        f"Runtime matches PyTorch on the {counted(sum(c.rows for c in calls), 'input')} of the {cfg.split} "
        f"split of its data, max abs difference {difference:.3g}."
    )
    return path


def forward_call(model: Any, batch: Any, own: bool, source: str) -> Call:
    """The arguments of the module's ``forward`` for ``batch``, as predict.py's loop makes
    the call (its own ``predict_step``, else ``forward`` of the batch's inputs)."""
    import torch

    from .inputs import call_model, inputs_of, samples_in
    from .predict import cannot_take

    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    forward = model.forward

    def noted(*args: Any, **kwargs: Any) -> Any:  # `self(...)` and `self.forward(...)` alike
        if not seen:
            seen.append((args, kwargs))
        return forward(*args, **kwargs)

    model.forward = noted  # on the instance, for this one call
    try:
        with torch.no_grad():
            call_model(model, batch, own)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        if own or teams_bug(error, inputs_given=True) is not None:
            raise  # its own predict_step, or a bug of its forward: its traceback
        raise cannot_take(model, source, error) from error
    finally:
        del model.forward
    if not seen:
        raise UserError(
            f"{type(model).__name__}'s predict_step does not call its forward, so export.py "
            "cannot tell what forward takes; export a module whose predict_step calls "
            "`self(...)`, or one without a predict_step whose forward takes the batch's inputs."
        )
    args, kwargs = seen[0]
    bound = inspect.signature(model.forward).bind(*args, **kwargs)
    tensors: dict[
        str, Tensor
    ] = {}  # by name: an argument's, a dict argument's key, `<argument>_<k>` in a list
    for name, value in bound.arguments.items():
        if isinstance(value, Mapping):
            tensors |= {str(k): v for k, v in value.items() if isinstance(v, torch.Tensor)}
        elif isinstance(value, (list, tuple)):
            tensors |= {
                f"{name}_{k}": v for k, v in enumerate(value) if isinstance(v, torch.Tensor)
            }
        elif isinstance(value, torch.Tensor):
            tensors[name] = value
    if len(tensors) == 1:
        tensors = {"input": next(iter(tensors.values()))}
    arguments = dict(bound.arguments)
    return Call(bound.args, bound.kwargs, arguments, tensors, samples_in(inputs_of(batch)))


def export_onnx(model: Any, calls: list[Call], path: Path) -> None:
    """``model.forward`` to ``path`` (one file), traced on the first call of several samples,
    any batch size, any size past it that the data's batches vary in (a padded length) where
    the model allows it, the others fixed at the data's (16 features take 16, not any), its
    progress lines and warnings off the screen; what the exporter cannot take is a
    :class:`UserError` naming the line of the team's code and the operation where it can."""
    import torch

    from .predict import named_outputs

    sample = next((c for c in calls if c.rows >= 2), calls[0])
    batch = torch.export.Dim("batch")

    def dims(values: list[Any], rows: list[int]) -> Any:
        """torch.export's dynamic shapes of one argument, seen as ``values`` in the calls: the
        batch's dimension, and the others that differ between calls."""
        first = values[0]
        if isinstance(first, Mapping):
            return {key: dims([v[key] for v in values], rows) for key in first}
        if isinstance(first, (list, tuple)):
            return type(first)(dims([v[k] for v in values], rows) for k in range(len(first)))
        if not isinstance(first, torch.Tensor) or not first.dim():
            return None
        sizes = {d: {v.shape[d] for v in values} for d in range(1, first.dim())}
        found: dict[int, Any] = {
            d: torch.export.Dim.AUTO for d, seen in sizes.items() if len(seen) > 1
        }
        if all(v.shape[0] == n for v, n in zip(values, rows, strict=True)):
            found[0] = batch
        return found

    rows = [call.rows for call in calls]
    dynamic = {
        name: dims([call.arguments[name] for call in calls], rows) for name in sample.arguments
    }
    with torch.no_grad():
        outputs = list(named_outputs(model(*sample.args, **sample.kwargs)))
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            logging.disable(logging.WARNING)
            try:
                torch.onnx.export(
                    model,
                    (),  # every argument by name: a dict last in args would be taken as kwargs
                    f=path,
                    kwargs=sample.arguments,
                    dynamo=True,
                    external_data=False,
                    verbose=False,
                    input_names=list(sample.tensors),
                    output_names=outputs,
                    dynamic_shapes=dynamic,
                )
            except Exception as error:
                inner = list(causes(error))[-1]
                where = team_line(model, error, lambda: exported(model, sample.arguments, dynamic))
                first = " ".join(str(inner).strip().split("\n")[0].split()).rstrip(".")
                complaint = f"{type(inner).__name__}: {first}." if first else describe(inner)
                raise UserError(
                    f"{type(model).__name__} cannot be exported to ONNX by torch's exporter: "
                    f"{where}{complaint} Write forward without it (e.g. torch.where for a branch "
                    "on tensor values), or leave that step out of forward, and export again."
                ) from error
    finally:
        logging.disable(logging.NOTSET)
    name_sizes(path, calls)


def name_sizes(path: Path, calls: list[Call]) -> None:
    """Name the free sizes of the file's inputs for torch's symbols (``s70``): ``batch``;
    ``length`` for the size past it (the padded length: one name for the inputs whose sizes
    there are equal in every batch of the data, ``<input>_length`` where they differ);
    ``<input>_dim<k>`` further. Then give each output the shape ONNX's own shape inference
    finds from them, and leave the file no other shapes (ONNX Runtime infers its own).
    Written because torch's exporter can declare an output's free length as the fixed one it
    traced (a GRU's outputs of ``(batch, 6, 5)`` for inputs of any length): ONNX Runtime then
    runs other lengths, but warns, and a reader of the file is told it takes one length."""
    import onnx
    from onnx import shape_inference

    model = onnx.load(str(path))
    free = [
        (value.name, k, size)
        for value in model.graph.input
        for k, size in enumerate(value.type.tensor_type.shape.dim)
        if size.dim_param and size.dim_param != "batch"
    ]

    def seen(name: str, k: int) -> tuple[int, ...]:  # the sizes of the data's batches
        return tuple(int(call.tensors[name].shape[k]) for call in calls)

    lengths = {seen(name, k) for name, k, _ in free if k == 1}
    named: dict[tuple[int, tuple[int, ...]], str] = {}
    for name, k, size in free:
        length = "length" if len(lengths) == 1 else f"{name}_length"
        size.dim_param = named.setdefault(
            (k, seen(name, k)), length if k == 1 else f"{name}_dim{k}"
        )
    given = {size.dim_param for _, _, size in free} | {"batch"}
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    for output in bare.graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = shape_inference.infer_shapes(bare, data_prop=True).graph.output
    except Exception:  # shape inference is a help only: the exporter's shapes then stay
        inferred = model.graph.output
    del model.graph.value_info[:]
    for output, found in zip(model.graph.output, inferred, strict=True):
        if found.type.tensor_type.HasField("shape"):
            output.type.tensor_type.shape.CopyFrom(found.type.tensor_type.shape)
        for k, size in enumerate(output.type.tensor_type.shape.dim):
            if size.dim_param and size.dim_param not in given:  # a size of its own
                size.dim_param = f"{output.name}_dim{k}"
    onnx.save(model, str(path))


def exported(model: Any, arguments: dict[str, Any], dynamic: dict[str, Any]) -> Any:
    """``torch.export``'s program of ``forward`` on ``arguments``, or None where it fails
    (for the line an operation the ONNX exporter cannot take was recorded at)."""
    import torch

    try:
        return torch.export.export(model, (), arguments, dynamic_shapes=dynamic, strict=False)
    except Exception:  # the exporter's failure, which the caller is already reporting
        return None


def check_with_onnxruntime(
    path: Path, model: Any, calls: list[Call], atol: float, rtol: float
) -> tuple[float, str]:
    """Run the file with ONNX Runtime on every call; the largest absolute difference from
    PyTorch's outputs and what its inputs are (``input `input` shaped (batch, 16) float32``),
    or a :class:`UserError` if one is beyond the tolerance."""
    import numpy as np
    import onnxruntime
    import torch
    from lightning_utilities.core.apply_func import apply_to_collection

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    worst, beyond, counts = 0.0, False, (0, 0)
    for call in calls:
        expected: list[np.ndarray] = []  # forward's tensors, in the order the file lists them
        with torch.no_grad():
            output = model(*call.args, **call.kwargs)
        apply_to_collection(output, torch.Tensor, lambda t, kept=expected: kept.append(t.numpy()))
        got = session.run(None, {name: call.tensors[name].numpy() for name in names})
        counts = (len(got), len(expected))
        beyond |= len(got) != len(expected)
        for have, want in zip(got, expected, strict=False):
            difference = np.abs(np.asarray(have, dtype=np.float64) - want.astype(np.float64))
            worst = max(worst, float(difference.max(initial=0.0)))
            beyond |= bool((difference > atol + rtol * np.abs(want)).any())
    if beyond or not np.isfinite(worst):
        raise UserError(
            f"ONNX Runtime's outputs differ from PyTorch's by up to {worst:.3g} on the test "
            f"inputs ({counts[0]} outputs for {counts[1]}), more than atol={atol} + "
            f"rtol={rtol} times PyTorch's; nothing was written. If that is close enough for "
            "you, export again with larger `atol=` and `rtol=`."
        )
    return worst, inputs_shown(session, calls[0])


def inputs_shown(session: Any, call: Call) -> str:
    """``input `input` shaped (batch, 16) float32``, or ``inputs `a` (batch, length) int64,
    ...``: the file's inputs, a size the file leaves free by its name (``*`` if it has none)."""
    shown = []
    for spec in session.get_inputs():
        sizes = [s if isinstance(s, (int, str)) else "*" for s in spec.shape]
        dtype = str(call.tensors[spec.name].dtype).removeprefix("torch.")
        shape = f"({', '.join(map(str, sizes))}{',' * (len(sizes) == 1)})"
        shown.append((spec.name, f"{shape} {dtype}"))
    if len(shown) == 1:
        return f"input `{shown[0][0]}` shaped {shown[0][1]}"
    return "inputs " + ", ".join(f"`{name}` {shape}" for name, shape in shown)


def main() -> None:
    """Console-script entry point (`my-project-export`)."""
    entry.main("export", export)


if __name__ == "__main__":
    main()
