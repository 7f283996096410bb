"""MLflow with no server to start: Lightning's ``MLFlowLogger`` into a store in the run
directory, or to the tracking server ``MLFLOW_TRACKING_URI`` names (the config file and the
best checkpoint go up with `callbacks/checkpoint_artifacts`). Under DDP only rank 0 logs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lightning.pytorch.utilities import rank_zero_info

from ..errors import UserError, require_extra
from .wandb import reachable


def shown_uri(uri: str) -> str:
    """``uri`` without the user and password a tracking URI may hold (``http://u:p@host``)."""
    parsed = urlparse(uri)
    host = parsed.netloc.rpartition("@")[2]
    return uri if host == parsed.netloc else parsed._replace(netloc=host).geturl()


def mlflow_logger(
    save_dir: str, tracking_uri: str | None = None, tags: Any = None, **kwargs: Any
) -> Any:
    """An ``MLFlowLogger`` for ``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else a store in
    ``save_dir``; a server that does not answer is a :class:`UserError` at once (MLflow retries
    for minutes, then fails the run). Each of the config's ``tags``, a tag of value true."""
    from lightning.pytorch.loggers import MLFlowLogger

    require_extra(("mlflow",), "mlflow", "logger=mlflow")
    # MLflow logs each step of creating a store at INFO; its warnings and errors still show.
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
    if uri is None:
        store = Path(save_dir).resolve()
        store.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{store / 'mlflow.db'}"
        kwargs.setdefault("artifact_location", str(store / "mlartifacts"))
    elif urlparse(uri).scheme in ("http", "https") and (unreachable := reachable(uri)):
        raise UserError(
            f"The MLflow tracking server {shown_uri(uri)} cannot be reached ({unreachable}). "
            "Start it, or unset MLFLOW_TRACKING_URI to log into the run directory (or pick "
            "another logger, e.g. logger=csv)."
        )
    rank_zero_info(f"MLflow: logging to {shown_uri(uri).removeprefix('sqlite:///')}.")
    tags = dict(tags) if hasattr(tags, "items") else {str(tag): "true" for tag in tags or ()}
    return MLFlowLogger(tracking_uri=uri, tags=tags or None, **kwargs)
