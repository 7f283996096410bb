"""`trainer.strategy/accelerator/devices/num_nodes` that cannot run on this machine.

Lightning finds the same mistakes, but later (after the run directory and the logger exist)
and in terms of its own arguments ("You requested gpu: [0, 1] But your machine only has:
[0]"). Here each one is a :class:`UserError` that says what to type instead. A world that
cannot form is refused before any process starts: several nodes with nothing that starts the
processes of the other nodes (it would wait for them forever), and launch variables
(``MASTER_PORT=abc``) the processes could not meet at.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from lightning.fabric.utilities.device_parser import _select_auto_accelerator
from lightning.pytorch.accelerators import AcceleratorRegistry, CUDAAccelerator, MPSAccelerator
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from ..errors import UserError
from ..strategies.dp import DP_NAME, DP_NODES_MESSAGE
from ..strategies.registry import register_strategies

_FIRST_NAMES = ("auto", DP_NAME, "ddp", "ddp_spawn")


def strategy_names() -> list[str]:
    """Every valid `trainer.strategy`: `auto` and Lightning's registry, with this project's
    strategies registered (idempotent: entry points have registered them already)."""
    register_strategies()
    registered = StrategyRegistry.available_strategies()
    return [n for n in _FIRST_NAMES if n == "auto" or n in registered] + [
        n for n in registered if n not in _FIRST_NAMES
    ]


def check_devices(trainer: Mapping[str, Any]) -> None:
    """Raise a UserError for a strategy, accelerator or device count that cannot run here."""
    strategy = trainer.get("strategy", "auto")
    accelerator = trainer.get("accelerator", "auto")
    if isinstance(strategy, str):
        _check_strategy_name(strategy.lower())
    if isinstance(accelerator, str):
        _check_devices(accelerator, trainer.get("devices", "auto"))
    if isinstance(strategy, str) and strategy.lower() == DP_NAME:
        _check_dp(int(trainer.get("num_nodes", 1) or 1))


def check_nodes_launched(trainer: Mapping[str, Any]) -> None:
    """Several nodes, and something started this process as one of them (a run, not a plan:
    `doctor` shows what such a config would use wherever it is asked)."""
    nodes = trainer.get("num_nodes", 1)
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1:
        _check_nodes_launched(nodes)


# What starts one process on each node: cluster schedulers and launchers Lightning detects,
# or the variables Lightning's docs have you set on each node to start them by hand (as
# Kubeflow's PyTorchJob does; Lightning cannot detect Kubeflow by itself).
_BY_HAND = ("NODE_RANK", "GROUP_RANK", "RANK")


def multi_node_launcher() -> str | None:
    """The name of what started this process on one of several nodes, if anything did."""
    from lightning.fabric.plugins.environments import (
        LSFEnvironment,
        SLURMEnvironment,
        TorchElasticEnvironment,
    )

    for environment in (SLURMEnvironment, TorchElasticEnvironment):
        if environment.detect():
            return environment.__name__
    try:
        if LSFEnvironment.detect():
            return LSFEnvironment.__name__
    except Exception:  # LSF's detection reads files that may be missing
        pass
    if any(name in os.environ for name in _BY_HAND) and "MASTER_ADDR" in os.environ:
        return "MASTER_ADDR and a rank"
    return None


def _check_nodes_launched(nodes: int) -> None:
    if multi_node_launcher() is not None:
        return
    raise UserError(
        f"trainer.num_nodes={nodes} asks for {nodes} machines, but nothing started this "
        "process as one of them (no torchrun, SLURM or LSF, and no NODE_RANK and MASTER_ADDR "
        "set): it would wait forever for the other nodes to join. Run on one "
        "machine with `trainer.num_nodes=1`, or start the run on every node, e.g. "
        f"`torchrun --nnodes={nodes} --nproc-per-node=<devices> --rdzv-endpoint=<host>:29500 "
        f"train.py trainer.num_nodes={nodes}`, or `-m hydra/launcher=slurm` on a SLURM cluster."
    )


# Variables the launcher and torch.distributed read as whole numbers; MASTER_PORT a TCP port.
_LAUNCH_NUMBERS = ("NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "RANK", "WORLD_SIZE")


def check_launch_environment(trainer: Any) -> None:
    """The variables the processes of a multi-process run meet by are usable: a bad one
    (``MASTER_PORT=abc``) fails when the launcher starts, after the run directory is written.

    Only the built Trainer knows whether this run has several processes."""
    if getattr(trainer, "world_size", 1) <= 1:
        return
    problems = []
    port = os.environ.get("MASTER_PORT")
    if port is not None and not (port.strip().isdigit() and 0 < int(port) < 65536):
        problems.append(f"MASTER_PORT={port!r} is not a TCP port (a whole number 1-65535)")
    for name in _LAUNCH_NUMBERS:
        value = os.environ.get(name)
        if value is not None and not value.strip().isdigit():
            problems.append(f"{name}={value!r} is not a whole number >= 0")
    if "MASTER_ADDR" in os.environ and not os.environ["MASTER_ADDR"].strip():
        problems.append("MASTER_ADDR is empty")
    if problems:
        raise UserError(
            f"This run starts {trainer.world_size} processes, which meet at MASTER_ADDR:"
            f"MASTER_PORT, but {'; '.join(problems)}. Fix the environment variable, or unset it "
            "(`unset MASTER_PORT`: a free port is picked)."
        )


def _check_strategy_name(name: str) -> None:
    valid = strategy_names()
    if name in valid:
        return
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" Did you mean `trainer.strategy={close[0]}`?" if close else ""
    raise UserError(
        f"trainer.strategy={name!r} is not a strategy.{hint} Valid names: {', '.join(valid)}. "
        "Use `trainer.strategy=ddp` for one process per device (GPUs, or CPU processes with "
        "`trainer.accelerator=cpu`), or `trainer.strategy=dp` for one process that splits each "
        "batch across the GPUs."
    )


def _check_devices(accelerator: str, devices: Any) -> None:
    known = ["auto", "gpu", *AcceleratorRegistry.available_accelerators()]
    if accelerator not in known:
        # Lightning's names are lower case (`CPU` is refused when the Trainer is built).
        close = [n for n in known if n == accelerator.lower()] or difflib.get_close_matches(
            accelerator, known, n=1
        )
        hint = f" Did you mean `trainer.accelerator={close[0]}`?" if close else ""
        raise UserError(
            f"trainer.accelerator={accelerator!r} is not an accelerator.{hint} Valid names: "
            f"{', '.join(dict.fromkeys(known))}. Use `trainer.accelerator=auto` to take the GPU "
            "when there is one and the CPU otherwise."
        )
    picked = accelerator
    if accelerator == "auto":
        picked = _select_auto_accelerator()
    elif accelerator == "gpu":
        picked = "mps" if MPSAccelerator.is_available() else "cuda"
    if picked == "cuda":
        _check_cuda_devices(devices)
    elif picked == "cpu":
        _check_cpu_devices(devices, chosen=accelerator == "cpu")
    elif picked == "mps":
        _check_mps_devices(devices)


def _check_cuda_devices(devices: Any) -> None:
    available = CUDAAccelerator.auto_device_count() if CUDAAccelerator.is_available() else 0
    if available == 0:
        raise UserError(
            "trainer.accelerator asks for a CUDA GPU, but this machine has none: run on the CPU "
            "with `trainer=cpu` (or `trainer=ddp_cpu` for two CPU processes)."
        )
    try:
        CUDAAccelerator.parse_devices(devices)
    except (MisconfigurationException, TypeError, ValueError) as error:
        visible = ", ".join(f"cuda:{i}" for i in range(available))
        raise UserError(
            f"trainer.devices={devices!r} asks for more GPUs than this machine has: it has "
            f"{available} ({visible}). Use `trainer.devices={available}` (or `trainer.devices=-1` "
            f"for all of them), or pick some by index, e.g. `trainer.devices=[0]`. "
            f"(Lightning said: {error})"
        ) from error


def _check_mps_devices(devices: Any) -> None:
    if not MPSAccelerator.is_available():
        raise UserError(
            "trainer.accelerator=mps asks for Apple silicon (MPS), but this machine has none: "
            "run on the CPU with `trainer=cpu`."
        )
    if devices not in ("auto", 1, "1", -1, "-1", [0]):
        raise UserError(
            f"trainer.devices={devices!r} asks for several Apple-silicon (MPS) devices, but MPS is "
            "one device. Use `trainer.devices=1`, or `trainer.accelerator=cpu trainer.devices=2` "
            "for two CPU processes."
        )


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _check_cpu_devices(devices: Any, chosen: bool) -> None:
    """`chosen`: the CPU was asked for, rather than picked by `auto` for want of a GPU."""
    count = None
    if isinstance(devices, int) and not isinstance(devices, bool):
        count = devices
    elif isinstance(devices, str) and devices.strip().isdigit():
        count = int(devices)
    if devices == "auto" or (count is not None and 0 < count <= usable_cores()):
        return
    if count is not None and count > 0:
        # Lightning would start them all; far more processes than cores hang in gloo's setup.
        cores = usable_cores()
        raise UserError(
            f"trainer.devices={devices!r} asks for {count} CPU processes, but this machine has "
            f"{cores} cores: use at most `trainer.devices={cores}`, or run on the GPUs of a "
            "machine that has them."
        )
    if not chosen and devices in (-1, "-1"):
        raise UserError(
            "trainer.devices=-1 asks for every GPU, but this machine has none (accelerator=auto "
            "picked the CPU): run on the CPU with `trainer=cpu` (or `trainer=ddp_cpu` for two "
            "CPU processes)."
        )
    raise UserError(
        f"trainer.devices={devices!r} does not say how many CPU processes to run "
        "(`trainer.accelerator=cpu`). Give a number, e.g. `trainer.devices=2` for two processes."
    )


def _check_dp(num_nodes: int) -> None:
    if num_nodes > 1:
        raise UserError(DP_NODES_MESSAGE.format(num_nodes=num_nodes))
    launched = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if launched > 1:
        raise UserError(
            f"strategy 'dp' runs as one process, but this run was started as {launched} processes "
            "(WORLD_SIZE, e.g. by torchrun). Start it once: `python train.py trainer.strategy=dp "
            "trainer.devices=2`, or keep the launcher and use `trainer.strategy=ddp`."
        )
