"""Serving: `python serve.py ckpt_path=PATH` answers `POST /predict` with what the model predicts.

An HTTP server (LitServe's) for any module, as predict.py runs one: the model and data of the
run that wrote the checkpoint, its ``predict_step`` given a batch shaped as the data's (or
``forward``: a classifier's outputs as class and probabilities), on the device and in the
precision the trainer config names. Concurrent requests are predicted in batches; a bad
request gets a 4xx and one sentence, and the server goes on (`serve_api.py`). ``GET /health``
says ``ok`` once the model is loaded; ``GET /info`` what to send. Ctrl-C or SIGTERM stop it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ..errors import UserError, require_extra
from . import entry
from .checkpoint_config import use_checkpoint_run

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe binds to


def serve(cfg: DictConfig) -> None:
    """Check, load the checkpoint's model, and serve it until stopped."""
    require_extra(("litserve",), "serve", "serve.py")
    import litserve as ls

    from .. import preflight
    from ..config import print_config_tree
    from . import build
    from .predict import classifier_of, first_batch, own_predict_step, split_loaders
    from .serve_api import CheckpointAPI, RequestCheck

    entry.register()
    ckpt_path = preflight.check_config(cfg, checkpoint_required=True)  # check
    assert ckpt_path is not None
    use_checkpoint_run(cfg, ckpt_path)  # its model and data, unless the command names them
    check_server_values(cfg)
    config = build.masked_config(cfg)  # build
    model = build.load_model(cfg.model._target_, ckpt_path).eval()
    batch = first_batch(split_loaders(cfg, model), cfg)
    signature = input_signature(model, batch, cfg.split)
    example = one_row(batch) if own_predict_step(model) else None
    task = None if example is not None else classifier_of(model, batch)
    check_answers(model, signature, example, task)
    api = CheckpointAPI(
        cfg.model._target_,
        ckpt_path,
        signature,
        example,
        task,
        precision=cfg.trainer.precision,
        max_batch_size=int(cfg.max_batch_size),
        batch_timeout=float(cfg.batch_timeout),
    )
    request = '{"inputs": [...]}'
    check = {"path": "/predict", "signature": signature, "max_bytes": cfg.max_request_bytes}
    server = ls.LitServer(
        api,
        accelerator=str(cfg.trainer.accelerator).lower(),
        devices=serving_devices(cfg.trainer.devices),
        workers_per_device=int(cfg.workers_per_device),
        timeout=float(cfg.timeout),
        middlewares=[(RequestCheck, check)],
        model_metadata={
            "checkpoint": ckpt_path,
            "model": type(model).__name__,
            "request": f"POST /predict {request}, inputs shaped {signature.describe()}",
        },
    )
    output_dir = Path(cfg.paths.output_dir)  # record what runs
    output_dir.mkdir(parents=True, exist_ok=True)
    print_config_tree(config)
    print_config_tree(config, save_to=output_dir / "config_tree.log")
    url = f"http://{'localhost' if cfg.host == '127.0.0.1' else cfg.host}:{cfg.port}"
    print(
        f"Serving {type(model).__name__} of {ckpt_path} at {url}/predict: POST {request} with "
        f"inputs shaped {signature.describe()} (from {signature.source}); GET {url}/health "
        "says ok once it is ready. Ctrl-C stops it.",
        flush=True,
    )
    with stops_as_litserve_expects():  # run, until stopped
        server.run(
            host=cfg.host,
            port=int(cfg.port),
            log_level=str(cfg.log_level),
            generate_client_file=False,
        )


def input_signature(model: Any, batch: Any, split: str) -> Any:
    """One input's shape and dtype: the model's ``in_shape`` hyperparameter (float32, as
    predict.py feeds files), else its ``example_input_array``, else the split's first batch."""
    from .predict import inputs_of
    from .serve_api import InputSignature

    in_shape = model.hparams.get("in_shape")
    if in_shape is not None:
        return InputSignature(tuple(int(n) for n in in_shape), "float32", "its in_shape")
    example = getattr(model, "example_input_array", None)
    if example is not None:
        return signature_of(example, "its example_input_array", type(model).__name__)
    return signature_of(inputs_of(batch), f"the {split} split of its data", type(model).__name__)


def signature_of(inputs: Any, source: str, name: str) -> Any:
    """The signature of a batch of inputs (``source`` says where they came from)."""
    import torch

    from .serve_api import InputSignature

    if not isinstance(inputs, torch.Tensor) or inputs.dim() < 1:
        raise UserError(
            f"{name} takes {type(inputs).__name__} inputs ({source}); serve.py and export.py "
            "take models whose input is one tensor, a batch of samples along its first dimension."
        )
    dtype = str(inputs.dtype).removeprefix("torch.")
    return InputSignature(tuple(inputs.shape[1:]), dtype, source)


def check_answers(model: Any, signature: Any, example: Any, task: str | None) -> None:
    """The model answers two inputs of the signature (zeros) as serve.py answers (a tensor or
    a dict of tensors with a row per input): found at start-up, not per request."""
    import torch

    from .serve_api import answer

    zeros = torch.zeros(2, *signature.shape, dtype=getattr(torch, signature.dtype))
    try:
        with torch.inference_mode():
            answer(model, zeros, example, task)
    except (RuntimeError, TypeError, ValueError, IndexError) as error:
        raise UserError(
            f"{type(model).__name__} cannot take inputs shaped {signature.describe()} (from "
            f"{signature.source}: {type(error).__name__}: {str(error).splitlines()[0][:200]}). "
            "Give the model an `in_shape` hyperparameter or an `example_input_array`."
        ) from error


def one_row(batch: Any) -> Any:
    """The first sample of a batch, as a batch (what ``like_data`` copies shapes from)."""
    if isinstance(batch, (list, tuple)):
        return type(batch)(part[:1] for part in batch)
    return batch[:1] if hasattr(batch, "shape") else batch


@contextlib.contextmanager
def stops_as_litserve_expects() -> Iterator[None]:
    """SIGTERM and Ctrl-C stop the server as LitServe stops on Ctrl-C, then end the job as a
    stopped job ends (exit status 128 + the signal number, `entry.stop_signals`).

    LitServe shuts its processes down when ``KeyboardInterrupt`` reaches its ``run``; the job's
    own handlers raise another exception, which LitServe does not expect there (it leaves its
    process manager mid-call and hangs). So here both signals raise ``KeyboardInterrupt``; a
    second one ends the server's processes and this one at once. The HTTP processes LitServe
    forks start with the default handlers, which uvicorn expects. LitServe's worker-monitoring
    thread, which may still poll the process manager LitServe is shutting down, is not heard
    from once the stop began (it reported a `BrokenPipeError` as a crash).
    """
    import multiprocessing

    from ..reliability.signals import STOP_SIGNALS, StopRequested

    received: list[int] = []

    def handle(signum: int, frame: Any) -> None:
        if received:
            for child in multiprocessing.active_children():
                child.kill()
            os._exit(128 + signum)
        received.append(signum)
        raise KeyboardInterrupt

    def not_while_stopping(record: logging.LogRecord) -> bool:
        return not received or record.threadName != "litserve-monitoring"

    litserve_log = logging.getLogger("litserve.server")
    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    litserve_log.addFilter(not_while_stopping)
    os.register_at_fork(after_in_child=_default_stop_signals)
    try:
        yield
    finally:
        litserve_log.removeFilter(not_while_stopping)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        raise StopRequested(received[0])


def _default_stop_signals() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)


def check_server_values(cfg: DictConfig) -> None:
    """Host, port, batching and size limits LitServe would refuse late or with a traceback;
    a port already taken."""
    if cfg.host not in HOSTS:
        raise UserError(
            f"host={cfg.host} is not one LitServe binds to; use host=127.0.0.1 (this machine "
            "only), host=0.0.0.0 (every network interface) or host=:: (IPv6)."
        )
    port = cfg.port
    if not isinstance(port, int) or isinstance(port, bool) or not 1024 <= port <= 65535:
        raise UserError(f"port={port} is not a port from 1024 to 65535; pass e.g. port=8000.")
    for key in ("max_batch_size", "workers_per_device", "max_request_bytes"):
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(f"{key}={value} is not a whole number of at least 1.")
    for key in ("batch_timeout", "timeout"):
        value = cfg.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise UserError(f"{key}={value} is not a number of seconds (0 or more).")
    with socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((cfg.host, port))
        except OSError as error:
            raise UserError(
                f"port={port} on {cfg.host} cannot be used ({error.strerror}); another server "
                f"may be listening there. Pass another port, e.g. port={port + 1}."
            ) from error


def serving_devices(devices: Any) -> Any:
    """LitServe's devices for the trainer config's (``-1``: every device)."""
    if devices in (-1, "-1", "auto", None):
        return "auto"
    if isinstance(devices, int) or (isinstance(devices, str) and devices.isdigit()):
        return int(devices)
    try:
        return [int(d) for d in devices]
    except (TypeError, ValueError) as error:
        raise UserError(
            f"trainer.devices={devices} names no devices serve.py can use; pass "
            "trainer.devices=1 (or N, or a list of device indices)."
        ) from error


def main() -> None:
    """Console-script entry point (`my-project-serve`)."""
    entry.main("serve", serve)


if __name__ == "__main__":
    main()
