"""What serve.py's server does with a request: ``{"inputs": X}``, X one input shaped like the
model's (or a batch of them), answered with what the module returns for them by name (a dict's
keys; a bare tensor is ``prediction`` for one value a sample, else ``output``), a row per input.

LitServe runs :class:`CheckpointAPI` in an inference worker; concurrent requests are predicted
together. It answers a worker's exception with a 500 for every request of the batch, so a bad
request never reaches one: :class:`RequestCheck`, in the HTTP process, answers it alone.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import litserve as ls
from fastapi import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

from ..errors import UserError
from .predict import as_classes, input_batch, like_data

if TYPE_CHECKING:
    import numpy as np
    import torch
    from starlette.requests import Request


FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


@dataclass(frozen=True)
class InputSignature:
    """One input's shape (without the batch dimension) and numpy dtype, and where it was read."""

    shape: tuple[int, ...]
    dtype: str
    source: str

    def describe(self) -> str:
        """``(N, 1, 8, 8) float32``."""
        return f"(N, {', '.join(map(str, self.shape))}) {self.dtype}"


def _finite(text: str) -> float:
    if not math.isfinite(value := float(text)):
        raise ValueError(f"{text} is too large for a float")
    return value


def _no_constant(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def request_inputs(body: bytes | Any, signature: InputSignature) -> tuple[np.ndarray, bool]:
    """The inputs of a request (its raw body, or its JSON already parsed) as an array shaped
    ``(N, *signature.shape)``, and whether it held a single input; else a 4xx with a sentence."""
    import numpy as np

    # (no doubled braces: generated projects must hold no Jinja-looking text)
    send = 'send {"inputs": [...]}, inputs shaped ' + signature.describe()
    payload = body
    if isinstance(body, (bytes, bytearray)):
        try:
            payload = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
        except (ValueError, UnicodeDecodeError) as error:
            raise HTTPException(400, f"The request body is not JSON ({error}): {send}.") from error
    if not isinstance(payload, Mapping) or set(payload) != {"inputs"}:
        keys = f"keys {sorted(payload)}" if isinstance(payload, Mapping) else type(payload).__name__
        raise HTTPException(
            422, f"The request is a JSON {keys}, not " + '{"inputs": ...}: ' + f"{send}."
        )
    try:
        array = np.asarray(payload["inputs"])
    except ValueError as error:
        raise HTTPException(
            422, f"The request's inputs are not an array (lists of unequal lengths): {send}."
        ) from error
    shape = signature.shape  # one input alone, as input_batch takes it (also (H, W) for (1, H, W))
    single = array.shape == shape or (
        len(shape) == 3 and shape[0] == 1 and array.shape == shape[1:]
    )
    try:
        inputs = input_batch(array, shape, "The request")
    except UserError as error:
        raise HTTPException(422, str(error)) from error
    return inputs.astype(signature.dtype, copy=False), single


def answer(model: Any, inputs: torch.Tensor, example: Any, task: str | None) -> dict[str, Any]:
    """What predict.py writes for these inputs, by name, on the CPU: ``predict_step`` of a
    batch shaped as the data's ``example`` for a module with its own (``example`` not None),
    else ``forward`` (a classifier's as class and probabilities). A :class:`UserError` for
    anything but a tensor or a dict of tensors with a row per input."""
    import torch

    if example is not None:
        output = model.predict_step(like_data(example, inputs), 0)
    else:
        output = model(inputs)
    if task is not None and isinstance(output, torch.Tensor):
        output = as_classes(output, task)
    if isinstance(output, torch.Tensor):
        one = output.dim() < 2 or output[0].numel() == 1
        named = {"prediction" if one else "output": output}
    elif isinstance(output, Mapping) and all(isinstance(v, torch.Tensor) for v in output.values()):
        named = {str(key): value for key, value in output.items()}
    else:
        raise UserError(
            f"The model's predictions are {type(output).__name__}s; serve.py answers with a "
            "tensor or a dict of tensors per batch. Return one of those from `predict_step`."
        )
    for key, value in named.items():
        if value.dim() == 0 or len(value) != len(inputs):
            raise UserError(
                f"The model's `{key}` has no row per input (shape {tuple(value.shape)} for "
                f"{len(inputs)} inputs); serve.py answers each request with its own rows."
            )
    return {key: value.detach().cpu() for key, value in named.items()}


class CheckpointAPI(ls.LitAPI):
    """A checkpoint's model behind LitServe. Holds plain values and small tensors: LitServe
    pickles it into each inference worker, which loads the checkpoint in :meth:`setup` on the
    device it is given, in the run's precision (through Fabric, as the Trainer does)."""

    def __init__(
        self,
        target: str,
        ckpt_path: str,
        signature: InputSignature,
        example: Any = None,
        task: str | None = None,
        precision: str | int = "32-true",
        max_batch_size: int = 64,
        batch_timeout: float = 0.005,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout)
        self.target, self.ckpt_path, self.signature = target, ckpt_path, signature
        self.example, self.task, self.precision = example, task, precision

    def setup(self, device: str) -> None:
        import signal

        from lightning.fabric import Fabric

        from .build import load_model

        # Ctrl-C reaches every process of the terminal's group: the server process stops this
        # one (SIGTERM) once no request is left, rather than each worker with a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        accelerator, _, index = str(device).partition(":")
        devices = [int(index)] if index else 1
        precision: Any = self.precision
        self.fabric = Fabric(accelerator=accelerator, devices=devices, precision=precision)
        self.model = self.fabric.setup_module(load_model(self.target, self.ckpt_path).eval())
        self.example = self.fabric.to_device(self.example)

    # `request` and the answer stay unannotated: LitServe makes FastAPI parse the body by the
    # annotation of `request` and shape the answer by encode_response's (here: as they come).
    def decode_request(self, request, context: dict[str, Any]) -> torch.Tensor:  # noqa: ANN001
        import torch

        inputs, single = request_inputs(request, self.signature)  # RequestCheck passed it
        context["count"], context["single"] = len(inputs), single
        return torch.from_numpy(inputs)

    def batch(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        import torch

        return torch.cat(inputs)

    def predict(self, inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        import torch

        with torch.inference_mode():
            return answer(self.model, self.fabric.to_device(inputs), self.example, self.task)

    def unbatch(self, output: dict[str, Any], context: list[dict[str, Any]]) -> list[Any]:
        ends = [0]
        for request in context:
            ends.append(ends[-1] + request["count"])
        return [{k: v[a:b] for k, v in output.items()} for a, b in itertools.pairwise(ends)]

    def encode_response(self, output: dict[str, Any], context: dict[str, Any]):  # noqa: ANN201
        return {k: (v[0] if context["single"] else v).tolist() for k, v in output.items()}


class RequestCheck(BaseHTTPMiddleware):
    """Middleware of the HTTP process: a ``POST`` to ``path`` larger than ``max_bytes`` or
    that :func:`request_inputs` refuses is answered here, alone; a good one goes on with its
    body (Starlette hands the body read here to the app)."""

    def __init__(self, app: Any, path: str, signature: InputSignature, max_bytes: int) -> None:
        super().__init__(app)
        self.path, self.signature, self.max_bytes = path, signature, max_bytes

    async def dispatch(self, request: Request, call_next: Any) -> Any:
        if request.method != "POST" or request.url.path != self.path:
            return await call_next(request)
        try:
            self.check_size(int(request.headers.get("content-length") or 0))
            if request.headers.get("content-type", "").lower().startswith(FORMS):
                raise HTTPException(
                    415,
                    "The request body is form data: send JSON, with the header Content-Type: "
                    "application/json.",
                )
            body = await request.body()
            self.check_size(len(body))
            request_inputs(body, self.signature)
        except HTTPException as error:
            return JSONResponse({"detail": error.detail}, status_code=error.status_code)
        return await call_next(request)

    def check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise HTTPException(
                413,
                f"The request is {size} bytes, more than this server takes "
                f"(max_request_bytes={self.max_bytes}): send fewer inputs per request.",
            )
