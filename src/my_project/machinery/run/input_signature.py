"""What one input of a checkpoint's model is: its shape and dtype, for serve.py and export.py.

A server must refuse a request of the wrong shape before it joins a batch (one bad request
would fail the batch it joined), and an ONNX file declares its input's shape and dtype. Where
that comes from, first found first:

- the model's ``in_shape`` hyperparameter (the examples', and what predict.py checks files
  against), float32 as predict.py feeds it;
- its ``example_input_array`` (Lightning's own attribute for a sample input);
- one batch of the data the run trained on (the ``split`` of ``data``), as its loader gives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from ..errors import UserError


@dataclass(frozen=True)
class InputSignature:
    shape: tuple[int, ...]  # one input's, without the batch dimension
    dtype: str  # numpy's name, e.g. "float32"
    source: str  # where it was read: "its in_shape", "the test split of its data", ...

    def describe(self) -> str:
        """``(N, 1, 8, 8) float32``."""
        return f"(N, {', '.join(map(str, self.shape))}) {self.dtype}"


def input_signature(cfg: DictConfig, model: Any) -> InputSignature:
    """The signature of ``model``'s inputs: its hyperparameters, else its sample input, else
    one batch of ``cfg.data`` (see the module docstring)."""
    in_shape = getattr(model, "hparams", {}).get("in_shape")
    if in_shape is not None:
        return InputSignature(tuple(int(n) for n in in_shape), "float32", "its in_shape")
    example = getattr(model, "example_input_array", None)
    if example is not None:
        return signature_of(example, "its example_input_array", type(model).__name__)
    source = f"the {cfg.split} split of its data"
    return signature_of(first_inputs(cfg, model), source, type(model).__name__)


def first_inputs(cfg: DictConfig, model: Any) -> Any:
    """The inputs of the first batch of ``cfg.split`` of ``cfg.data``."""
    from .predict import split_loader

    for batch in split_loader(cfg, model):
        return batch_inputs(batch)
    raise UserError(
        f"The {cfg.split} split of {cfg.data._target_} is empty; pick another `split=`."
    )


def batch_inputs(batch: Any) -> Any:
    """A batch's inputs: its first element (``(x, y)``), or the batch itself."""
    return batch[0] if isinstance(batch, (list, tuple)) else batch


def signature_of(inputs: Any, source: str, model_name: str) -> InputSignature:
    """The signature of a batch of inputs (``source`` says where they came from)."""
    import torch

    if not isinstance(inputs, torch.Tensor) or inputs.dim() < 1:
        raise UserError(
            f"{model_name} takes {type(inputs).__name__} inputs ({source}); serve.py and "
            "export.py take models whose input is one tensor, a batch of samples along its "
            "first dimension."
        )
    dtype = str(inputs.dtype).removeprefix("torch.")
    return InputSignature(tuple(int(n) for n in inputs.shape[1:]), dtype, source)
