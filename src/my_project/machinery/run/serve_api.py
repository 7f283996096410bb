"""What serve.py's server does with a request, ``{"inputs": X}`` (one input or a batch; named
arrays for a model of named inputs): what predict.py writes for them, by name, a row per input.
LitServe fails every request of a batch for one worker's exception, so :class:`RequestCheck`, in
the HTTP process, answers a bad one alone (422); named inputs, whose sizes past the first
dimension are free, are predicted a request at a time, so that one the model fails on is
answered alone too.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import TYPE_CHECKING, Any

import litserve as ls
from fastapi import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

from ..errors import UserError
from ..fault import teams_bug
from .inputs import (
    ONE,
    Arrays,
    Refused,
    Signature,
    call_model,
    counted,
    inputs_of,
    said,
    samples_in,
)
from .predict import cannot_take, named_outputs

if TYPE_CHECKING:
    import torch
    from starlette.requests import Request

log = logging.getLogger(__name__)


def request_inputs(body: Any, signature: Signature) -> tuple[Arrays, bool]:
    """The inputs of a request (its raw body, or its JSON already parsed), checked against
    ``signature``, and whether it held a single input; else an HTTPException (422) of one
    sentence."""
    # (no doubled braces: generated projects must hold no Jinja-looking text)
    try:
        payload = json.loads(body) if isinstance(body, (bytes, bytearray)) else body
        if not isinstance(payload, dict):
            raise Refused(
                f"is a JSON {type(payload).__name__}, not an object with one key, `inputs`"
            )
        if set(payload) != {"inputs"}:
            raise Refused(f"holds the keys {sorted(payload)}, not the one key `inputs`")
        return signature.check(payload["inputs"])
    except Refused as error:
        raise HTTPException(422, f"The request {error}: send {signature.request()}.") from error
    except ValueError as error:  # json's JSONDecodeError, a body that is not UTF-8
        problem = f"The request cannot be read as JSON ({said(error)})"
        raise HTTPException(422, f"{problem}: send {signature.request()}.") from error


def request_of(signature: Signature, batch: Any) -> dict[str, Any]:
    """A batch of the data as a client sends it: ``{"inputs": ...}``, JSON's lists."""
    inputs = inputs_of(batch)
    if not signature.named:
        return {"inputs": inputs.tolist()}
    return {"inputs": {spec.name: inputs[spec.name].tolist() for spec in signature.inputs}}


def answer(model: Any, batch: Any, own: bool, task: str | None) -> dict[str, torch.Tensor]:
    """What predict.py writes for a batch made of a request's inputs, by name, on the CPU:
    ``predict_step`` for a module with its own, else ``forward`` of the inputs; a
    :class:`UserError` for anything without a row per input."""
    output = call_model(model, batch, own)
    named = named_outputs(output, task)
    count = samples_in(inputs_of(batch))
    for key, value in named.items():
        if value.dim() == 0 or len(value) != count:
            raise UserError(
                f"The model's `{key}` has no row per input (shape {tuple(value.shape)} for "
                f"{counted(count, 'input')}); serve.py answers each request with its own rows."
            )
    return {key: value.detach().cpu() for key, value in named.items()}


def check_it_answers(
    model: Any, signature: Signature, batch: Any, own: bool, task: str | None, source: str
) -> None:
    """serve.py's check at start: the data's first batch, sent as a client sends it, goes the
    way a request goes and is answered, or serve.py stops before it listens."""
    import torch

    arrays, _ = signature.check(request_of(signature, batch)["inputs"])
    try:
        with torch.inference_mode():
            answer(model, signature.batch(arrays), own, task)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        if own or teams_bug(error, inputs_given=True) is not None:
            raise  # its own predict_step, or a bug of its forward: its traceback
        raise cannot_take(model, source, error) from error


class Unanswered(str):
    """A request of named inputs that the model failed on: the sentence it is answered."""


class CheckpointAPI(ls.LitAPI):
    """A checkpoint's model behind LitServe, pickled into each inference worker, which loads it
    in :meth:`setup` on its device, in the run's precision (through Fabric, as the Trainer)."""

    def __init__(
        self,
        target: str,
        ckpt_path: str,
        signature: Signature,
        own: bool = False,
        task: str | None = None,
        precision: Any = "32-true",
        **batching: Any,  # LitAPI's max_batch_size, batch_timeout
    ) -> None:
        super().__init__(**batching)
        self.target, self.ckpt_path, self.signature = target, ckpt_path, signature
        self.own, self.task, self.precision = own, task, precision

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

    # `request` and the answer stay unannotated: LitServe makes FastAPI parse the body by the
    # annotation of `request` and shape the answer by encode_response's (here: as they come).
    def decode_request(self, request, context: dict[str, Any]) -> Arrays:  # noqa: ANN001
        inputs, single = request_inputs(request, self.signature)  # RequestCheck passed it
        context["count"], context["single"] = len(next(iter(inputs.values()))), single
        return inputs

    def batch(self, inputs: list[Arrays]) -> Arrays | list[Arrays]:
        import numpy as np

        if self.signature.named:  # sizes past the first dimension differ: one at a time
            return inputs
        return {ONE: np.concatenate([arrays[ONE] for arrays in inputs])}

    def predict(self, inputs: Arrays | list[Arrays]) -> Any:
        if isinstance(inputs, list):
            return [self._answer_alone(arrays) for arrays in inputs]
        # one request (max_batch_size=1: LitServe batches nothing)
        return self._answer_alone(inputs) if self.signature.named else self._answer(inputs)

    def _answer(self, arrays: Arrays) -> dict[str, torch.Tensor]:
        import torch

        batch = self.fabric.to_device(self.signature.batch(arrays))
        with torch.inference_mode():
            return answer(self.model, batch, self.own, self.task)

    def _answer_alone(self, arrays: Arrays) -> dict[str, torch.Tensor] | Unanswered:
        """Named inputs passed every check of their names, dimensions, dtypes and tied sizes,
        yet their values may be beyond the model (a token id past its vocabulary, a length
        past the padding): the model's complaint answers that request alone (422), its
        traceback in the server's log, while the data's own batch was answered at start."""
        try:
            return self._answer(arrays)
        except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
            log.exception("serve.py: the model failed on a request's inputs")
            return Unanswered(
                f"The model cannot take the request's inputs ({said(error)}): send "
                f"{self.signature.request()}, as the data module makes them."
            )

    def unbatch(self, output: Any, context: list[dict[str, Any]]) -> list[Any]:
        if isinstance(output, list):
            return output
        ends = [0, *itertools.accumulate(request["count"] for request in context)]
        return [{k: v[a:b] for k, v in output.items()} for a, b in itertools.pairwise(ends)]

    def encode_response(self, output: Any, context: dict[str, Any]):  # noqa: ANN201
        if isinstance(output, Unanswered):
            return JSONResponse({"detail": str(output)}, status_code=422)
        return {k: (v[0] if context["single"] else v).tolist() for k, v in output.items()}


class RequestCheck(BaseHTTPMiddleware):
    """Middleware of the HTTP process: a ``POST /predict`` larger than ``max_bytes`` (413) or
    that :func:`request_inputs` refuses (422) is answered here, alone; a good one goes on with
    its body (Starlette hands the body read here to the app), as JSON whatever its
    Content-Type."""

    def __init__(self, app: Any, signature: Signature, max_bytes: int) -> None:
        super().__init__(app)
        self.signature, self.max_bytes = signature, max_bytes

    async def dispatch(self, request: Request, call_next: Any) -> Any:
        if request.method != "POST" or request.url.path != "/predict":
            return await call_next(request)
        try:
            declared = int(request.headers.get("content-length") or 0)  # none when chunked
            body = b"" if declared > self.max_bytes else await request.body()
            if max(declared, len(body)) > self.max_bytes:
                raise HTTPException(413, f"The request is over max_request_bytes={self.max_bytes}.")
            request_inputs(body, self.signature)
        except HTTPException as error:
            return JSONResponse({"detail": error.detail}, status_code=error.status_code)
        # The body is JSON, whatever its Content-Type said (`curl -d` says a form's, which
        # LitServe would parse as a form): the app is told so (it reads the scope's headers).
        headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-type"]
        request.scope["headers"] = [*headers, (b"content-type", b"application/json")]
        return await call_next(request)
