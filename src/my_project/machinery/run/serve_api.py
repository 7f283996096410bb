"""What serve.py's server does with a request, ``{"inputs": X}`` (one input or a batch): what
predict.py writes for them, by name, a row per input. LitServe fails every request of a batch
for one worker's exception, so :class:`RequestCheck`, in the HTTP process, answers a bad one
alone (422).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import litserve as ls
from fastapi import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

from ..errors import UserError
from .boundary import describe
from .predict import like_data, named_outputs

if TYPE_CHECKING:
    import numpy as np
    import torch
    from starlette.requests import Request


def shown(shape: Sequence[int], dtype: str) -> str:
    """``(N, 1, 8, 8) float32``: what a request's inputs are shaped as."""
    return f"(N, {', '.join(map(str, shape))}) {dtype}"


def request_inputs(body: Any, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, bool]:
    """The inputs of a request (its raw body, or its JSON already parsed) as an array shaped
    ``(N, *shape)`` (``(N, H, W)`` for one channel too), and whether it held a single input;
    else an HTTPException (422)."""
    import numpy as np

    # (no doubled braces: generated projects must hold no Jinja-looking text)
    send = 'Send {"inputs": [...]}, inputs shaped ' + shown(shape, dtype) + "."
    try:
        payload = json.loads(body) if isinstance(body, (bytes, bytearray)) else body
        if set(payload) != {"inputs"}:
            raise KeyError(f"keys {sorted(payload)}, not 'inputs'")
        array = np.asarray(payload["inputs"], dtype=np.float32)
    except (ValueError, TypeError, KeyError) as error:
        raise HTTPException(422, f"The request cannot be read: {describe(error)} {send}") from error
    short = shape[1:] if len(shape) == 3 and shape[0] == 1 else shape  # no channel axis
    single = array.shape in (shape, short)
    array = array.reshape(-1, *shape) if single or array.shape[1:] == short else array
    if array.shape[1:] != shape or not len(array):
        raise HTTPException(422, f"The request holds inputs of shape {array.shape}. {send}")
    if not np.isfinite(array).all():
        raise HTTPException(422, f"The request has NaN or infinite values. {send}")
    return array.astype(dtype, copy=False), single


def answer(model: Any, inputs: torch.Tensor, example: Any, task: str | None) -> dict[str, Any]:
    """What predict.py writes for these inputs, by name, on the CPU: ``predict_step`` of a
    batch shaped as the data's ``example`` for a module with its own (``example`` not None),
    else ``forward``; a :class:`UserError` for anything without a row per input."""
    if example is not None:
        output = model.predict_step(like_data(example, inputs), 0)
    else:
        output = model(inputs)
    named = named_outputs(output, task)
    for key, value in named.items():
        if value.dim() == 0 or len(value) != len(inputs):
            raise UserError(
                f"The model's `{key}` has no row per input (shape {tuple(value.shape)} for "
                f"{len(inputs)} inputs); serve.py answers each request with its own rows."
            )
    return {key: value.detach().cpu() for key, value in named.items()}


class CheckpointAPI(ls.LitAPI):
    """A checkpoint's model behind LitServe, pickled into each inference worker, which loads it
    in :meth:`setup` on its device, in the run's precision (through Fabric, as the Trainer)."""

    def __init__(
        self,
        target: str,
        ckpt_path: str,
        shape: tuple[int, ...],
        dtype: str = "float32",
        example: Any = None,
        task: str | None = None,
        precision: Any = "32-true",
        **batching: Any,  # LitAPI's max_batch_size, batch_timeout
    ) -> None:
        super().__init__(**batching)
        self.target, self.ckpt_path, self.shape, self.dtype = target, ckpt_path, shape, dtype
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
        self.fabric = Fabric(accelerator=accelerator, devices=devices, precision=self.precision)
        self.model = self.fabric.setup_module(load_model(self.target, self.ckpt_path).eval())
        self.example = self.fabric.to_device(self.example)

    # `request` and the answer stay unannotated: LitServe makes FastAPI parse the body by the
    # annotation of `request` and shape the answer by encode_response's (here: as they come).
    def decode_request(self, request, context: dict[str, Any]) -> torch.Tensor:  # noqa: ANN001
        import torch

        inputs, single = request_inputs(request, self.shape, self.dtype)  # RequestCheck passed it
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
        ends = [0, *itertools.accumulate(request["count"] for request in context)]
        return [{k: v[a:b] for k, v in output.items()} for a, b in itertools.pairwise(ends)]

    def encode_response(self, output: dict[str, Any], context: dict[str, Any]):  # noqa: ANN201
        return {k: (v[0] if context["single"] else v).tolist() for k, v in output.items()}


class RequestCheck(BaseHTTPMiddleware):
    """Middleware of the HTTP process: a ``POST /predict`` larger than ``max_bytes`` (413) or
    that :func:`request_inputs` refuses (422) is answered here, alone; a good one goes on with
    its body (Starlette hands the body read here to the app)."""

    def __init__(self, app: Any, shape: tuple[int, ...], dtype: str, max_bytes: int) -> None:
        super().__init__(app)
        self.shape, self.dtype, self.max_bytes = shape, dtype, max_bytes

    async def dispatch(self, request: Request, call_next: Any) -> Any:
        if request.method != "POST" or request.url.path != "/predict":
            return await call_next(request)
        try:
            declared = int(request.headers.get("content-length") or 0)  # none when chunked
            body = b"" if declared > self.max_bytes else await request.body()
            if max(declared, len(body)) > self.max_bytes:
                raise HTTPException(413, f"The request is over max_request_bytes={self.max_bytes}.")
            request_inputs(body, self.shape, self.dtype)
        except HTTPException as error:
            return JSONResponse({"detail": error.detail}, status_code=error.status_code)
        return await call_next(request)
