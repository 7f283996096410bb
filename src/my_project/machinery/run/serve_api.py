"""What serve.py's server does with a request: LitServe's API for a checkpoint, and the check
every request passes where it arrives.

LitServe runs :class:`CheckpointAPI` in an inference worker (a process of its own, on the
device): ``setup`` loads the checkpoint there; ``decode_request`` turns each request's JSON
into a tensor; concurrent requests are concatenated into one batch (``batch``), predicted
together as predict.py predicts (``predict_step`` for a module with its own, ``forward``
otherwise), split back (``unbatch``) and answered as JSON (``encode_response``).

LitServe answers a worker's exception with a 500 for every request of its batch, so a bad
request must never reach a worker: :class:`RequestCheck`, a middleware of the HTTP process,
reads each body first and answers a bad one alone, with a 4xx and one sentence.

The request: ``{"inputs": X}``, X one input shaped like the model's (or a batch of them, one
more dimension in front). The answer: what the module returns for them, by name (a dict's
keys; a bare tensor is ``prediction`` for one value a sample, else ``output``), a list with
one row per input for a batch, the one row for a single input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import litserve as ls

from ..errors import UserError
from .input_signature import InputSignature

if TYPE_CHECKING:
    import numpy as np
    import torch

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BadRequest(Exception):
    """A request the server refuses: an HTTP status and one sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _not_a_number(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a float")
    return value


def request_inputs(body: bytes | Any, signature: InputSignature) -> tuple[np.ndarray, bool]:
    """The inputs of a request (its raw body, or its JSON already parsed) as an array shaped
    ``(N, *signature.shape)``, and whether it held a single input; else :class:`BadRequest`."""
    import numpy as np

    from .predict import input_batch

    # (no doubled braces: generated projects must hold no Jinja-looking text)
    send = 'send {"inputs": [...]}, inputs shaped ' + signature.describe()
    payload = body
    if isinstance(body, (bytes, bytearray)):
        try:
            payload = json.loads(body, parse_constant=_not_a_number, parse_float=_finite)
        except (ValueError, UnicodeDecodeError) as error:
            raise BadRequest(400, f"The request body is not JSON ({error}): {send}.") from error
    if not isinstance(payload, Mapping) or set(payload) != {"inputs"}:
        keys = f"keys {sorted(payload)}" if isinstance(payload, Mapping) else type(payload).__name__
        raise BadRequest(
            422, f"The request is a JSON {keys}, not " + '{"inputs": ...}: ' + f"{send}."
        )
    try:
        array = np.asarray(payload["inputs"])
    except ValueError as error:
        raise BadRequest(
            422, f"The request's inputs are not an array (lists of unequal lengths): {send}."
        ) from error
    shape = signature.shape  # one input alone, as input_batch takes it (also (H, W) for (1, H, W))
    single = array.shape == shape or (
        len(shape) == 3 and shape[0] == 1 and array.shape == shape[1:]
    )
    try:
        inputs = input_batch(array, signature.shape, "The request")
    except UserError as error:
        raise BadRequest(422, str(error)) from error
    return inputs.astype(signature.dtype, copy=False), single


def predict_batch(model: Any, inputs: torch.Tensor, whole_batches: bool) -> Any:
    """What predict.py gets for these inputs: ``predict_step`` of a batch ``(inputs,)`` for a
    module with its own, ``forward`` otherwise."""
    return model.predict_step((inputs,), 0) if whole_batches else model(inputs)


def named_outputs(output: Any, count: int) -> dict[str, torch.Tensor]:
    """The module's answer for ``count`` inputs, by name, on the CPU (see the docstring);
    a :class:`UserError` for anything but a tensor or a dict of tensors with a row per input."""
    import torch

    if isinstance(output, torch.Tensor):
        flat = output.reshape(len(output), -1) if output.dim() else output.reshape(1, 1)
        named = {"prediction" if flat.shape[1] == 1 else "output": output}
    elif isinstance(output, Mapping) and all(isinstance(v, torch.Tensor) for v in output.values()):
        named = {str(key): value for key, value in output.items()}
    else:
        raise UserError(
            f"The model's predictions are {type(output).__name__}s; serve.py answers with a "
            "tensor or a dict of tensors per batch. Return one of those from `predict_step`."
        )
    short = [key for key, value in named.items() if value.dim() == 0 or len(value) != count]
    if short:
        raise UserError(
            f"The model's `{short[0]}` has no row per input (shape "
            f"{tuple(named[short[0]].shape)} for {count} inputs); serve.py answers each request "
            "with its own rows."
        )
    return {key: value.detach().cpu() for key, value in named.items()}


class CheckpointAPI(ls.LitAPI):
    """A checkpoint's model behind LitServe (see the module docstring).

    Holds plain values only: LitServe pickles it into each inference worker, which loads the
    checkpoint in :meth:`setup`, on the device it is given, in the run's precision (through
    Fabric, as the Trainer does).
    """

    def __init__(
        self,
        target: str,
        ckpt_path: str,
        signature: InputSignature,
        whole_batches: bool,
        precision: str | int = "32-true",
        max_batch_size: int = 64,
        batch_timeout: float = 0.005,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout)
        self.target = target
        self.ckpt_path = ckpt_path
        self.signature = signature
        self.whole_batches = whole_batches
        self.precision = precision

    def setup(self, device: str) -> None:
        import signal

        from lightning.fabric import Fabric

        # Ctrl-C reaches every process of the terminal's group: the server process stops this
        # one (SIGTERM) once no request is left, rather than each worker with a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)

        from .build import load_model

        accelerator, _, index = str(device).partition(":")
        self.fabric = Fabric(
            accelerator=accelerator,
            devices=[int(index)] if index else 1,
            precision=self.precision,  # type: ignore[arg-type]
        )
        self.model = self.fabric.setup_module(load_model(self.target, self.ckpt_path).eval())

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
            output = predict_batch(self.model, self.fabric.to_device(inputs), self.whole_batches)
        return named_outputs(output, len(inputs))

    def unbatch(
        self, output: dict[str, torch.Tensor], context: list[dict[str, Any]]
    ) -> list[dict[str, torch.Tensor]]:
        answers, start = [], 0
        for request in context:
            end = start + request["count"]
            answers.append({key: value[start:end] for key, value in output.items()})
            start = end
        return answers

    def encode_response(self, output: dict[str, torch.Tensor], context: dict[str, Any]):  # noqa: ANN201
        return {
            key: (value[0] if context["single"] else value).tolist()
            for key, value in output.items()
        }


class RequestCheck:
    """ASGI middleware of the HTTP process: reads a ``POST`` to the API's path whole (at most
    ``max_bytes``) and answers a bad one itself (:func:`request_inputs`), so it never joins a
    batch; a good one goes on unchanged. Pure ASGI (not Starlette's ``BaseHTTPMiddleware``),
    so the body is read once and passed on as it came."""

    def __init__(
        self, app: Callable[..., Any], path: str, signature: InputSignature, max_bytes: int
    ) -> None:
        self.app = app
        self.path = path
        self.signature = signature
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        if content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
            await _answer(send, 415, "The request body is form data: send JSON, with the header Content-Type: application/json.")  # fmt: skip
            return
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            await _answer(send, 413, self._too_large(int(length)))
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await _answer(send, 413, self._too_large(len(body)))
                return
            if not message.get("more_body", False):
                break
        try:
            request_inputs(bytes(body), self.signature)
        except BadRequest as error:
            await _answer(send, error.status, str(error))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # what the client does next (e.g. disconnect)
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self, size: int) -> str:
        return (
            f"The request is {size} bytes, more than this server takes "
            f"(max_request_bytes={self.max_bytes}): send fewer inputs per request."
        )


async def _answer(send: Send, status: int, sentence: str) -> None:
    body = json.dumps({"detail": sentence}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
