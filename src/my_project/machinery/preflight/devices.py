"""What the devices a run asks for need of this machine, said before the run starts.

What Lightning says without naming what to run instead (a GPU this machine lacks, as a project
generated for GPUs meets on a laptop), or lets through: several nodes with nothing that starts
the others (they would wait forever), a ``MASTER_PORT`` the processes cannot meet at.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from ..errors import UserError


def check_devices(trainer: Mapping[str, Any]) -> None:
    """A GPU asked for (``accelerator=gpu``, ``cuda``, ``mps``, or every GPU: ``devices=-1``)
    where there is none: named with the preset that runs here. And `dp`, one process, started
    as several (by torchrun): each would run the whole job on its own."""
    import torch

    launched = os.environ.get("WORLD_SIZE", "1")
    if str(trainer.get("strategy")).lower() == "dp" and launched.isdigit() and int(launched) > 1:
        raise UserError(
            f"strategy 'dp' runs as one process, but this run was started as {launched} "
            "processes (WORLD_SIZE, e.g. by torchrun). Start it once (`python train.py "
            "trainer.strategy=dp`), or keep the launcher and use `trainer.strategy=ddp`."
        )
    asked = str(trainer.get("accelerator", "auto")).lower()
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if asked == "auto" and trainer.get("devices") == -1 and not (cuda or mps):
        what = "trainer.devices=-1 asks for every GPU"
    elif {"cuda": not cuda, "mps": not mps, "gpu": not (cuda or mps)}.get(asked):
        what = (
            f"trainer.accelerator={asked} asks for {'Apple silicon' if asked == 'mps' else 'a GPU'}"
        )
    else:
        check_gpu_count(trainer, asked, torch.cuda.device_count() if cuda else 0)
        return
    raise UserError(
        f"{what}, but this machine has none: run on the CPU with `trainer=cpu` (or "
        "`trainer=ddp_cpu` for two CPU processes)."
    )


def check_gpu_count(trainer: Mapping[str, Any], asked: str, gpus: int) -> None:
    """More CUDA GPUs asked for (``devices=4``, ``devices=[0,3]``) than this machine has."""
    devices = trainer.get("devices", "auto")
    if asked not in ("gpu", "cuda", "auto") or not gpus or isinstance(devices, bool):
        return
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, int):
        wanted, highest = devices, devices - 1
    elif isinstance(devices, (list, tuple)) or (isinstance(devices, str) and "," in devices):
        ids = [
            int(i)
            for i in (devices.split(",") if isinstance(devices, str) else devices)
            if str(i).strip()
        ]
        wanted, highest = len(ids), max(ids, default=-1)
    else:
        return
    if wanted <= gpus and highest < gpus:
        return
    what = f"{wanted} GPUs" if wanted > gpus else f"GPU {highest} (GPUs are counted from 0)"
    raise UserError(
        f"trainer.devices={devices} asks for {what}, but this machine has {gpus}: use "
        f"`trainer.devices={gpus}` (or `trainer.devices=-1` for all of them), or run on several "
        "machines (`trainer.num_nodes`, with torchrun or SLURM)."
    )


def multi_node_launcher() -> str | None:
    """The name of what started this process as one of several nodes, if anything did: a cluster
    scheduler or launcher Lightning detects, or the variables Lightning's docs have you set on
    each node to start them by hand."""
    from lightning.fabric.plugins.environments import (
        LSFEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    for environment in (SLURMEnvironment, TorchElasticEnvironment, LSFEnvironment):
        with contextlib.suppress(Exception):  # LSF's detection reads files that may be missing
            if environment.detect():
                return environment.__name__
    by_hand = any(name in os.environ for name in ("NODE_RANK", "GROUP_RANK", "RANK"))
    return "MASTER_ADDR and a rank" if by_hand and "MASTER_ADDR" in os.environ else None


def check_nodes_launched(trainer: Mapping[str, Any]) -> None:
    """Several nodes, and something started this process as one of them."""
    nodes = trainer.get("num_nodes", 1)
    if not isinstance(nodes, int) or nodes <= 1 or multi_node_launcher() is not None:
        return
    raise UserError(
        f"trainer.num_nodes={nodes} asks for {nodes} machines, but nothing started this process "
        "as one of them (no torchrun, SLURM or LSF, and no NODE_RANK and MASTER_ADDR set): it "
        "would wait forever for the other nodes to join. Run on one machine with "
        "`trainer.num_nodes=1`, or start the run on every node (torchrun, or "
        "`-m hydra/launcher=slurm` on a SLURM cluster)."
    )


def check_launch_environment(trainer: Any) -> None:
    """The port the processes of a multi-process run meet at (a bad one fails when the launcher
    starts, after the run directory is written). Only the built Trainer knows their number."""
    port = os.environ.get("MASTER_PORT", "1")
    if trainer.world_size > 1 and not (port.isdigit() and 0 < int(port) < 65536):
        raise UserError(
            f"This run starts {trainer.world_size} processes, which meet at MASTER_ADDR:"
            f"MASTER_PORT, but MASTER_PORT={port!r} is not a TCP port (a whole number 1-65535). "
            "Fix it, or unset it (`unset MASTER_PORT`: a free port is picked)."
        )


def check_precision_kept(asked: Any, trainer: Any) -> None:
    """float16 autocast asked for where Lightning only warns and runs bfloat16 (on the CPU)."""
    if str(asked) in ("16", "16-mixed") and str(trainer.precision) != "16-mixed":  # 16: its alias
        raise UserError(
            f"trainer.precision={asked} asks for float16 autocast, which Lightning does not run "
            f"on {type(trainer.accelerator).__name__.removesuffix('Accelerator')}: it would "
            f"train in {trainer.precision} instead. Use `trainer.precision=bf16-mixed` (or "
            "`32-true`) here, or run on a GPU (`trainer=gpu`)."
        )
