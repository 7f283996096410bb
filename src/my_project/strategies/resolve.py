"""Check `trainer.strategy/accelerator/devices/num_nodes` before a Trainer is built, and say
what a Trainer resolved them to.

Lightning finds the same mistakes, but later (after the run directory and the logger exist)
and in terms of its own arguments ("You requested gpu: [0, 1] But your machine only has:
[0]"). Here each one is a :class:`UserError` that says what to type instead.

What `auto` becomes is Lightning's decision (its accelerator connector, run by the Trainer's
constructor); :func:`plan_devices` builds a Trainer from the config only to read that
decision, and :func:`device_choice` reads it from any Trainer, so the device report (the
prediction) and the run's `run_info.json` (the record) describe it the same way.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lightning.fabric.utilities.device_parser import _select_auto_accelerator
from lightning.pytorch.accelerators import AcceleratorRegistry, CUDAAccelerator, MPSAccelerator
from lightning.pytorch.strategies import StrategyRegistry
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from ..utils.errors import UserError
from .dp import DP_NAME, DP_NODES_MESSAGE

if TYPE_CHECKING:
    from lightning.pytorch import Trainer

_FIRST_NAMES = ("auto", DP_NAME, "ddp", "ddp_spawn")


def strategy_names() -> list[str]:
    """Every valid `trainer.strategy`: `auto` and Lightning's registry (with this project's dp)."""
    registered = StrategyRegistry.available_strategies()
    return [n for n in _FIRST_NAMES if n == "auto" or n in registered] + [
        n for n in registered if n not in _FIRST_NAMES
    ]


def check_strategy_and_devices(trainer: Mapping[str, Any]) -> None:
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
    if accelerator == "auto":
        accelerator = _select_auto_accelerator()
    elif accelerator == "gpu":
        accelerator = "mps" if MPSAccelerator.is_available() else "cuda"
    if accelerator == "cuda":
        _check_cuda_devices(devices)
    elif accelerator == "cpu":
        _check_cpu_devices(devices)
    elif accelerator == "mps" and devices not in ("auto", 1, "1", -1, "-1", [0]):
        raise UserError(
            f"trainer.devices={devices!r} asks for several Apple-silicon (MPS) devices, but MPS is "
            "one device. Use `trainer.devices=1`, or `trainer.accelerator=cpu trainer.devices=2` "
            "for two CPU processes."
        )


def _check_cuda_devices(devices: Any) -> None:
    available = CUDAAccelerator.auto_device_count() if CUDAAccelerator.is_available() else 0
    if available == 0:
        raise UserError(
            "trainer.accelerator asks for a GPU, but this machine has none (torch sees no CUDA "
            "device). Train on the CPU: `trainer=cpu` (one process), or `trainer=ddp_cpu` / "
            "`trainer.accelerator=cpu trainer.devices=2` (two processes)."
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


def _check_cpu_devices(devices: Any) -> None:
    if devices == "auto" or (
        isinstance(devices, int) and not isinstance(devices, bool) and devices > 0
    ):
        return
    if isinstance(devices, str) and devices.strip().isdigit() and int(devices) > 0:
        return
    raise UserError(
        f"trainer.devices={devices!r} does not say how many CPU processes to run (this run uses "
        "the CPU: `trainer.accelerator=cpu`, or no GPU was found). Give a number, e.g. "
        "`trainer.devices=2` for two processes."
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


@dataclass(frozen=True)
class DeviceChoice:
    """What a Trainer runs on, in plain values (the device report and `run_info.json`)."""

    accelerator: str  # the device type: "cpu", "cuda", "mps", ...
    devices: int  # per node (Trainer.num_devices)
    device_ids: list[int]
    strategy: str  # the strategy class, e.g. "SingleDeviceStrategy", "HydraDDPStrategy"
    start_method: str | None  # DDP: "popen" (re-runs the script), "spawn" or "fork"
    backend: str | None  # process-group backend of multi-process strategies: gloo, nccl, ...
    num_nodes: int
    world_size: int  # processes in all
    precision: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def device_choice(trainer: Trainer) -> DeviceChoice:
    """What ``trainer`` runs on (before or after it ran: the values are the same)."""
    strategy = trainer.strategy
    backend = getattr(strategy, "process_group_backend", None)
    if backend is None and hasattr(strategy, "_get_process_group_backend"):
        backend = strategy._get_process_group_backend()  # what setup will pick
    return DeviceChoice(
        accelerator=strategy.root_device.type,
        devices=trainer.num_devices,
        device_ids=list(trainer.device_ids),
        strategy=type(strategy).__name__,
        start_method=getattr(strategy, "_start_method", None),
        backend=backend,
        num_nodes=trainer.num_nodes,
        world_size=trainer.world_size,
        precision=str(trainer.precision),
    )


def plan_devices(trainer_cfg: Any) -> DeviceChoice:
    """What a run with this `trainer` config would use, decided by Lightning itself.

    Checks the config like train.py (a :class:`UserError` for what cannot run here), then
    builds the Trainer the way train.py does (``instantiate(cfg.trainer, ...)``) with no
    callbacks or loggers, quietly; building one starts no processes and writes nothing.
    Lightning's warnings (e.g. "GPU available but not used") reach the caller.
    """
    import tempfile

    from hydra.utils import instantiate

    check_strategy_and_devices(trainer_cfg)
    with _quiet_lightning_info(), tempfile.TemporaryDirectory() as root:
        trainer = instantiate(
            trainer_cfg,
            callbacks=[],
            logger=False,
            default_root_dir=root,  # the run directory does not exist yet
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        return device_choice(trainer)


def run_record(trainer: Trainer) -> dict[str, Any]:
    """:func:`device_choice` of a Trainer that ran, plus the process group torch really had."""
    import torch.distributed as dist

    record = device_choice(trainer).as_dict()
    record["process_group"] = (
        {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
        if dist.is_available() and dist.is_initialized()
        else None
    )
    return record


@contextlib.contextmanager
def _quiet_lightning_info() -> Iterator[None]:
    """Hide the lines a Trainer logs when built ("GPU available: ...", tips)."""
    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
