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
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    netrc_path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return netrc_path.is_file() and netrc.netrc(netrc_path).authenticators(host) is not None
    except (netrc.NetrcParseError, OSError):
        return False


def multirun_group() -> str | None:
    """`multirun-<sweep folder>` inside a Hydra multirun (so its jobs group together), else None."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return f"multirun-{Path(hydra_cfg.sweep.dir).name}"


def wandb_server() -> str:
    return os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")


def wandb_reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if a TCP connection to the server opens within ``timeout``, else the reason.

    With credentials but no network, wandb 0.31 retries for about 100 s and then fails the
    run (`CommError: ... context deadline exceeded`); a 5 s check avoids both. The check runs
    in a daemon thread because name resolution ignores socket timeouts.
    """
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


def wandb_logger(
    save_dir: str, offline: bool | None = None, group: str | None = None, **kwargs: Any
) -> Any:
    """A `WandbLogger` whose mode is decided here rather than by wandb's interactive login.

    ``offline=None`` (the default) means: online if credentials exist or ``WANDB_MODE`` asks
    for it, offline otherwise, with one line saying how to upload the run later.
    ``group=None`` groups the jobs of a multirun (a sweep) by their sweep folder.
    """
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
    unreachable = None if offline else wandb_reachable(wandb_server())
    if unreachable:
        offline = True
        os.environ["WANDB_MODE"] = "offline"
        rank_zero_info(
            f"wandb: credentials found but {wandb_server()} cannot be reached ({unreachable}); "
            f"logging offline under {save_dir}/wandb. Upload later with "
            f"`wandb sync {save_dir}/wandb/offline-run-*`."
        )
    elif offline:
        os.environ.setdefault("WANDB_MODE", "offline")
        reason = "WANDB_MODE=offline" if mode in ("offline", "dryrun") else "no credentials found"
        rank_zero_info(
            f"wandb: {reason}, logging offline under {save_dir}/wandb; upload later "
            f"with `wandb sync {save_dir}/wandb/offline-run-*` (after `wandb login`)."
        )
    os.environ.setdefault("WANDB_SILENT", "true")
    logger = WandbLogger(
        save_dir=save_dir, offline=offline, group=group or multirun_group(), **kwargs
    )
    # Lightning 2.6 always passes `anonymous=None`, which current wandb warns about on every
    # run although nobody asked for it; drop the key (a private attribute, checked by a test).
    if logger._wandb_init.get("anonymous") is None:
        logger._wandb_init.pop("anonymous", None)
    check_init_settings(logger._wandb_init)
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    return logger


# `wandb.init`'s arguments and the settings they become (wandb 0.2x-0.3x, `wandb_init.init`).
_INIT_SETTINGS = {
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


def check_init_settings(init: dict[str, Any]) -> None:
    """The arguments the logger will pass to ``wandb.init``, validated now as wandb's own
    ``Settings`` validates them (a tag over 64 characters, a bad ``mode``): the run starts
    lazily, at the first log, after the run directory is written."""
    import wandb

    settings = wandb.Settings()
    for argument, name in _INIT_SETTINGS.items():
        value = init.get(argument)
        if value is not None:
            setattr(settings, name, tuple(value) if argument == "tags" else value)


def finish_wandb_run(failed: bool = False) -> None:
    """End the active wandb run, if any, so the next training in this process (the next job
    of a multirun) starts its own run. Lightning never calls ``wandb.finish()`` itself, and a
    new ``WandbLogger`` silently reuses a run left open. Imports nothing wandb did not."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=1 if failed else 0)
