"""`trainer.strategy/accelerator/devices/num_nodes` that cannot run on this machine.

Lightning finds the same mistakes, but later (after the run directory and the logger exist)
and in terms of its own arguments ("You requested gpu: [0, 1] But your machine only has:
[0]"). Here each one is a :class:`UserError` that says what to type instead.
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
        _check_devices(accelerator.lower(), trainer.get("devices", "auto"))
    if isinstance(strategy, str) and strategy.lower() == DP_NAME:
        _check_dp(int(trainer.get("num_nodes", 1) or 1))


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
        raise UserError(
            f"trainer.accelerator={accelerator!r} is not an accelerator. Valid names: "
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
