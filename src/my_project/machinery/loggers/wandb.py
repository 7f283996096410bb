"""Weights & Biases that never blocks a run: online with credentials, offline otherwise."""

from __future__ import annotations

import netrc
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import getproxies, proxy_bypass

from lightning.pytorch.utilities import rank_zero_info

from ..errors import UserError


def wandb_credentials_available() -> bool:
    """True when wandb could log in without asking: an API key in the env or in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(wandb_server()).hostname
    path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return path.is_file() and netrc.netrc(path).authenticators(host or "") is not None
    except (netrc.NetrcParseError, OSError):
        return False


def wandb_server() -> str:
    return os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")


def reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if a TCP connection to the server (or its proxy) opens within ``timeout``, else the
    reason. With credentials but no network, wandb retries for about 100 s and then fails the
    run; MLflow for minutes. In a daemon thread: name resolution ignores socket timeouts."""
    parsed = urlparse(url)
    proxy = getproxies().get(parsed.scheme)  # behind a proxy, the proxy is what must answer
    if proxy and not proxy_bypass(parsed.hostname or ""):
        parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result: list[str | None] = []

    def connect() -> None:
        try:
            with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
                result.append(None)
        except OSError as error:
            result.append(f"{type(error).__name__}: {error}")

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return result[0] if result else f"no answer within {timeout:g} s"


# `wandb.init`'s arguments and the settings they become (wandb 0.2x-0.3x)
INIT_SETTINGS = {
    "job_type": "run_job_type",
    "project": "project",
    "entity": "entity",
    "tags": "run_tags",
    "group": "run_group",
    "name": "run_name",
    "notes": "run_notes",
    "mode": "mode",
    "resume": "resume",
    "id": "run_id",
}


def wandb_logger(
    save_dir: str, offline: bool | None = None, group: str | None = None, **kwargs: Any
) -> Any:
    """Lightning's ``WandbLogger``, its mode decided here rather than by wandb's interactive
    login: ``offline=None`` is online with credentials (or ``WANDB_MODE=online``), offline
    otherwise, with one line saying how to upload the run later. ``group=None`` groups the
    jobs of a multirun by their sweep folder. The arguments wandb checks only when the run
    starts (at the first log, after the run directory is written) are checked now."""
    import wandb
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.loggers import WandbLogger

    mode = os.environ.get("WANDB_MODE")
    credentials = wandb_credentials_available()
    if offline is None:
        offline = mode in ("offline", "dryrun") or (mode != "online" and not credentials)
    if not offline and not credentials:
        asked = "WANDB_MODE=online" if mode == "online" else "logger.wandb.offline=false"
        raise UserError(
            f"{asked} asks wandb to log online, but no credentials were found (no "
            "WANDB_API_KEY, no `wandb login`), and wandb would stop the run to ask for them. Run "
            f"`wandb login` once, or drop {asked} to log offline (`wandb sync` uploads later)."
        )
    unreachable = None if offline else reachable(wandb_server())
    sync = f"`wandb sync {save_dir}/wandb/offline-run-*`"
    if unreachable:
        offline = True
        os.environ["WANDB_MODE"] = "offline"
        rank_zero_info(
            f"wandb: credentials found but {wandb_server()} cannot be reached ({unreachable}); "
            f"logging offline under {save_dir}/wandb. Upload later with {sync}."
        )
    elif offline:
        os.environ.setdefault("WANDB_MODE", "offline")
        reason = "WANDB_MODE=offline" if mode in ("offline", "dryrun") else "no credentials found"
        rank_zero_info(
            f"wandb: {reason}, logging offline under {save_dir}/wandb; upload later "
            f"with {sync} (after `wandb login`)."
        )
    os.environ.setdefault("WANDB_SILENT", "true")
    # wandb's terminal set up from the environment now, before Lightning's `wandb.init(...,
    # anonymous=None)` makes it warn, on every run, of a setting nobody asked for.
    wandb.setup()
    if group is None and HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        group = f"multirun-{Path(HydraConfig.get().sweep.dir).name}"
    settings = wandb.Settings()  # wandb.init's checks of these (a tag over 64 characters...)
    for argument, name in INIT_SETTINGS.items():
        value = {**kwargs, "group": group}.get(argument)
        if value is not None:
            setattr(settings, name, tuple(value) if argument == "tags" else value)
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    return WandbLogger(save_dir=save_dir, offline=offline, group=group, **kwargs)


def finish_wandb_run(failed: bool = False) -> None:
    """End the active wandb run, if any, so the next training in this process (the next job
    of a multirun) starts its own run. Lightning never calls ``wandb.finish()`` itself, and a
    new ``WandbLogger`` silently reuses a run left open. Imports nothing wandb did not."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=1 if failed else 0)
