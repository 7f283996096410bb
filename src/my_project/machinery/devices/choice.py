"""What a Trainer runs on, in plain values and the same words for the device report
(`doctor.py`) and every run's `run_info.json` (`run/record.py`). What `auto` becomes is
Lightning's decision (its accelerator connector, in the Trainer's constructor)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .. import lightning_compat as compat

if TYPE_CHECKING:
    from lightning.pytorch import Trainer


@dataclass(frozen=True)
class DeviceChoice:
    accelerator: str  # the device type: "cpu", "cuda", "mps", ...
    devices: int  # per node (Trainer.num_devices)
    device_ids: list[int]
    strategy: str  # the strategy class, e.g. "SingleDeviceStrategy", "HydraDDPStrategy"
    start_method: str | None  # DDP: "popen" (re-runs the script), "spawn" or "fork"
    backend: str | None  # process-group backend of multi-process strategies: gloo, nccl, ...
    num_nodes: int
    world_size: int  # processes in all
    precision: str


def device_choice(trainer: Trainer) -> DeviceChoice:
    """What ``trainer`` runs on (before or after it ran: the values are the same)."""
    start_method, backend = compat.ddp_launch(trainer.strategy)
    return DeviceChoice(
        trainer.strategy.root_device.type,
        trainer.num_devices,
        list(trainer.device_ids),
        type(trainer.strategy).__name__,
        start_method,
        backend,
        trainer.num_nodes,
        trainer.world_size,
        str(trainer.precision),
    )


def run_record(trainer: Trainer) -> dict[str, Any]:
    """`device_choice` of a Trainer that ran, and the process group torch really had."""
    import torch.distributed as dist

    group = None
    if dist.is_available() and dist.is_initialized():
        group = {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
    return {**asdict(device_choice(trainer)), "process_group": group}
