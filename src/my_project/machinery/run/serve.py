"""Serving: `python serve.py ckpt_path=PATH` answers `POST /predict` as predict.py predicts
(LitServe's server, on the device and in the precision the trainer config names), once the
model has answered the data's first batch sent as a request. Concurrent requests are predicted
in batches; a bad request gets a 4xx and the server goes on (`serve_api.py`). ``GET /health``
says ``ok`` once the model is loaded. Ctrl-C or SIGTERM stop it.
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

from omegaconf import DictConfig, OmegaConf

from ..errors import UserError, require_extra
from . import entry
from .boundary import describe
from .checkpoint_config import checkpoint_run

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe binds to


def serve(cfg: DictConfig) -> None:
    """Check, load the checkpoint's model, see it answer the data's first batch as a request,
    and serve it until stopped."""
    require_extra(("litserve",), "serve", "serve.py")
    import litserve as ls
    from lightning.pytorch.utilities.model_helpers import is_overridden

    from ..config import print_config_tree
    from .predict import classifier_of, signature_for, split_loaders
    from .serve_api import CheckpointAPI, RequestCheck, check_it_answers

    ckpt_path, config, model = checkpoint_run(cfg)  # check, build
    check_address(cfg.host, cfg.port)
    loaders, batch = split_loaders(cfg, model)
    own = is_overridden("predict_step", model)  # gets batches shaped as the data's
    source = f"the {cfg.split} split"
    signature = signature_for(model, loaders, own, source)
    task = None if own else classifier_of(model, batch)
    check_it_answers(model, signature, batch, own, task, source)
    devices = OmegaConf.to_object(cfg.trainer).get("devices", "auto")  # type: ignore[union-attr]
    try:  # LitServe's own checks of its settings
        api = CheckpointAPI(
            cfg.model._target_, ckpt_path, signature, own, task, cfg.trainer.precision,
            max_batch_size=cfg.max_batch_size, batch_timeout=cfg.batch_timeout,
        )  # fmt: skip
        server = ls.LitServer(
            api,
            accelerator=str(cfg.trainer.accelerator).lower(),
            devices="auto" if devices in (-1, "-1", "auto") else devices,
            workers_per_device=cfg.workers_per_device,
            timeout=cfg.timeout,
            middlewares=[
                (RequestCheck, {"signature": signature, "max_bytes": cfg.max_request_bytes})
            ],
        )
    except (ValueError, TypeError) as error:
        raise UserError(
            f"LitServe refuses serve.py's settings ({describe(error)}) Fix it on the command "
            "line or in configs/serve.yaml."
        ) from error
    output_dir = Path(cfg.paths.output_dir)  # record what runs
    output_dir.mkdir(parents=True, exist_ok=True)
    entry.announce_run_dir()  # every check passed
    print_config_tree(config)
    print_config_tree(config, save_to=output_dir / "config_tree.log")
    url = f"http://{'localhost' if cfg.host == '127.0.0.1' else cfg.host}:{cfg.port}"
    send = f"POST {signature.request()}"
    print(f"Serving {type(model).__name__} of {ckpt_path} at {url}/predict: {send}.", flush=True)
    from ..reliability import signals

    signals.run_finished()  # up: a stop is how it ends, and keeps what it wrote
    with stops_as_litserve_expects():  # run, until stopped
        server.run(
            host=cfg.host, port=cfg.port, log_level=cfg.log_level, generate_client_file=False
        )


def check_address(host: Any, port: Any) -> None:
    """What LitServe checks only once it runs, and a port already taken."""
    if host not in HOSTS or type(port) is not int or not 1024 <= port <= 65535:  # not a bool
        raise UserError(
            f"host={host} port={port}: serve.py listens on host=127.0.0.1 (this machine only), "
            "0.0.0.0 or :: (every network interface), at a port from 1024 to 65535 (port=8000)."
        )
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except (OSError, OverflowError) as error:
            raise UserError(
                f"port={port} on {host} cannot be used ({error}); another server may be "
                f"listening there. Pass another port, e.g. port={port + 1}."
            ) from error


@contextlib.contextmanager
def stops_as_litserve_expects() -> Iterator[None]:
    """SIGTERM and Ctrl-C stop the server as LitServe stops on Ctrl-C (``KeyboardInterrupt``
    in its ``run``: another exception there hangs it), then end the job as a stopped job ends
    (exit status 128 + the signal number); a second signal ends every process at once. The HTTP
    processes LitServe forks keep the default handlers, which uvicorn expects; LitServe's
    monitoring thread, which reports a `BrokenPipeError` once the stop began, is not heard.
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


def main() -> None:
    """Console-script entry point (`my-project-serve`)."""
    entry.main("serve", serve)


if __name__ == "__main__":
    main()
