"""Weights & Biases that never blocks a run: online with credentials, offline otherwise."""

from __future__ import annotations

import netrc
import os
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import getproxies, proxy_bypass

from lightning.pytorch.utilities import rank_zero_info

from ..errors import UserError


def reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if a TCP connection to the server (or its proxy) opens within ``timeout``, else the
    reason. With credentials but no network, wandb retries for about 100 s and then fails the
    run; MLflow for minutes."""
    parsed = urlparse(url)
    proxy = getproxies().get(parsed.scheme)  # behind a proxy, the proxy is what must answer
    if proxy and not proxy_bypass(parsed.hostname or ""):
        parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
            return None
    except OSError as error:
        return f"{type(error).__name__}: {error}"


def wandb_logger(
    save_dir: str, offline: bool | None = None, group: str | None = None, **kwargs: Any
) -> Any:
    """Lightning's ``WandbLogger``, its mode decided here, not by wandb's interactive login:
    ``offline=None`` is online with credentials (``WANDB_API_KEY``, ~/.netrc) and a server that
    answers, offline otherwise (one line says how to upload later). ``group=None``: a multirun's."""
    import wandb
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.loggers import WandbLogger

    mode = os.environ.get("WANDB_MODE")
    server = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    try:
        login = netrc.netrc(os.environ.get("NETRC")).authenticators(urlparse(server).hostname or "")
    except (netrc.NetrcParseError, OSError):
        login = None
    credentials = bool(os.environ.get("WANDB_API_KEY") or login)
    if offline is None:
        offline = mode in ("offline", "dryrun") or (mode != "online" and not credentials)
    if not offline and not credentials:
        asked = "WANDB_MODE=online" if mode == "online" else "logger.wandb.offline=false"
        raise UserError(
            f"{asked} asks wandb to log online, but no credentials were found (no "
            "WANDB_API_KEY, no `wandb login`), and wandb would stop the run to ask for them. Run "
            f"`wandb login` once, or drop {asked} to log offline (`wandb sync` uploads later)."
        )
    why = "WANDB_MODE=offline" if mode in ("offline", "dryrun") else "no credentials found"
    if not offline and (unreachable := reachable(server)):
        offline, why = True, f"credentials found but {server} cannot be reached ({unreachable})"
    if offline:
        os.environ["WANDB_MODE"] = "offline"
        rank_zero_info(
            f"wandb: {why}; logging offline under {save_dir}/wandb. Upload later with "
            f"`wandb sync {save_dir}/wandb/offline-run-*` (after `wandb login`)."
        )
    os.environ.setdefault("WANDB_SILENT", "true")
    # wandb's terminal set up from the environment now, before Lightning's `wandb.init(...,
    # anonymous=None)` makes it warn, on every run, of a setting nobody asked for.
    wandb.setup()
    if group is None and HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        group = f"multirun-{Path(HydraConfig.get().sweep.dir).name}"
    # wandb.init checks these at the first log, after the run directory is written: now.
    tags, name = tuple(kwargs.get("tags") or ()), kwargs.get("name")
    wandb.Settings(run_tags=tags, run_group=group, run_name=name, project=kwargs.get("project"))
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    return WandbLogger(save_dir=save_dir, offline=offline, group=group, **kwargs)


def finish_wandb_run(failed: bool = False) -> None:
    """End the active wandb run, so the next job of a multirun starts its own: Lightning never
    calls ``wandb.finish()``, and a new ``WandbLogger`` silently reuses a run left open."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=1 if failed else 0)
