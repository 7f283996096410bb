"""Devices a run asks for that this machine lacks, said in the template's terms (`trainer=cpu`).

Lightning refuses a strategy or accelerator name that does not exist, more GPUs than there are,
and `dp` on several nodes itself when the Trainer is built (`run/boundary.py` names the key).
Checked here is what it says without naming what to run instead (a GPU this machine lacks), or
lets through: more CPU processes than cores (they hang in gloo's setup), several nodes with
nothing that starts the others (they would wait forever), launch variables the processes could
not meet at (``MASTER_PORT=abc``), `dp` started as several processes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import UserError

_NO_GPU = "run on the CPU with `trainer=cpu` (or `trainer=ddp_cpu` for two CPU processes)."


def check_devices(trainer: Mapping[str, Any]) -> None:
    """A UserError for an accelerator or a number of devices that cannot run here."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    def available(name: str) -> bool:
        return (
            name in AcceleratorRegistry and AcceleratorRegistry[name]["accelerator"].is_available()
        )

    asked = trainer.get("accelerator", "auto")
    if not isinstance(asked, str):
        return
    picked = {"gpu": "mps" if available("mps") else "cuda"}.get(asked, asked)
    if asked == "auto":  # as Lightning picks: a TPU, Apple silicon, a CUDA GPU, else the CPU
        picked = next((n for n in ("tpu", "mps", "cuda") if available(n)), "cpu")
    if picked == "cpu":
        _check_cpu_devices(trainer.get("devices", "auto"), chosen=asked == "cpu")
    elif picked in AcceleratorRegistry and not available(picked):
        if picked not in ("cuda", "mps"):
            raise UserError(
                f"`trainer.accelerator={asked}` is not available on this machine (Lightning finds "
                "no such device); use `trainer.accelerator=auto` for the GPU when there is one and "
                "the CPU otherwise."
            )
        lacks = "a CUDA GPU" if picked == "cuda" else "Apple silicon (MPS)"
        todo = _NO_GPU if picked == "cuda" else "run on the CPU with `trainer=cpu`."
        raise UserError(f"trainer.accelerator asks for {lacks}, but this machine has none: {todo}")
    launched = os.environ.get("WORLD_SIZE", "1")
    if str(trainer.get("strategy")).lower() == "dp" and launched.isdigit() and int(launched) > 1:
        raise UserError(
            f"strategy 'dp' runs as one process, but this run was started as {launched} "
            "processes (WORLD_SIZE, e.g. by torchrun). Start it once: `python train.py "
            "trainer.strategy=dp trainer.devices=2`, or keep the launcher and use "
            "`trainer.strategy=ddp`."
        )


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _check_cpu_devices(devices: Any, chosen: bool) -> None:
    """`chosen`: the CPU was asked for, rather than picked by `auto` for want of a GPU."""
    count = int(devices) if str(devices).strip().lstrip("-").isdigit() else None
    if devices == "auto" or (count is not None and 0 < count <= usable_cores()):
        return
    if count is not None and count > 0:  # Lightning would start them all, and they would hang
        raise UserError(
            f"trainer.devices={devices!r} asks for {count} CPU processes, but this machine has "
            f"{usable_cores()} cores: use at most `trainer.devices={usable_cores()}`, or run on "
            "the GPUs of a machine that has them."
        )
    if not chosen and count == -1:
        raise UserError(
            "trainer.devices=-1 asks for every GPU, but this machine has none (accelerator=auto "
            f"picked the CPU): {_NO_GPU}"
        )
    raise UserError(
        f"trainer.devices={devices!r} does not say how many CPU processes to run "
        "(`trainer.accelerator=cpu`). Give a number, e.g. `trainer.devices=2` for two processes."
    )


# What starts one process on each node: cluster schedulers and launchers Lightning detects, or
# the variables Lightning's docs have you set on each node to start them by hand (Kubeflow).
_BY_HAND = ("NODE_RANK", "GROUP_RANK", "RANK")


def multi_node_launcher() -> str | None:
    """The name of what started this process on one of several nodes, if anything did."""
    from lightning.fabric.plugins.environments import (
        LSFEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    for environment in (SLURMEnvironment, TorchElasticEnvironment, LSFEnvironment):
        try:
            if environment.detect():
                return environment.__name__
        except Exception:  # LSF's detection reads files that may be missing
            continue
    if any(name in os.environ for name in _BY_HAND) and "MASTER_ADDR" in os.environ:
        return "MASTER_ADDR and a rank"
    return None


def check_nodes_launched(trainer: Mapping[str, Any]) -> None:
    """Several nodes, and something started this process as one of them (a run, not a plan:
    `doctor` shows what such a config would use wherever it is asked)."""
    nodes = trainer.get("num_nodes", 1)
    if not isinstance(nodes, int) or nodes <= 1 or multi_node_launcher() is not None:
        return
    raise UserError(
        f"trainer.num_nodes={nodes} asks for {nodes} machines, but nothing started this "
        "process as one of them (no torchrun, SLURM or LSF, and no NODE_RANK and MASTER_ADDR "
        "set): it would wait forever for the other nodes to join. Run on one machine with "
        f"`trainer.num_nodes=1`, or start the run on every node, e.g. `torchrun --nnodes={nodes} "
        f"--nproc-per-node=<devices> --rdzv-endpoint=<host>:29500 train.py "
        f"trainer.num_nodes={nodes}`, or `-m hydra/launcher=slurm` on a SLURM cluster."
    )


def check_launch_environment(trainer: Any) -> None:
    """The variables the processes of a multi-process run meet by are usable (a bad one fails
    when the launcher starts, after the run directory is written). Only the built Trainer
    knows whether this run has several processes."""
    if getattr(trainer, "world_size", 1) <= 1:
        return
    problems = []
    port = os.environ.get("MASTER_PORT")
    if port is not None and not (port.strip().isdigit() and 0 < int(port) < 65536):
        problems.append(f"MASTER_PORT={port!r} is not a TCP port (a whole number 1-65535)")
    for name in ("NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        if (value := os.environ.get(name)) is not None and not value.strip().isdigit():
            problems.append(f"{name}={value!r} is not a whole number >= 0")
    if "MASTER_ADDR" in os.environ and not os.environ["MASTER_ADDR"].strip():
        problems.append("MASTER_ADDR is empty")
    if problems:
        raise UserError(
            f"This run starts {trainer.world_size} processes, which meet at MASTER_ADDR:"
            f"MASTER_PORT, but {'; '.join(problems)}. Fix the environment variable, or unset it "
            "(`unset MASTER_PORT`: a free port is picked)."
        )
