"""What a Trainer runs on, in plain values: the device report predicts it (`doctor.py`), and
every run records it in `run_info.json` (`run/record.py`), in the same words.

What `auto` becomes is Lightning's decision (its accelerator connector, run by the Trainer's
constructor); :func:`device_choice` reads it from any Trainer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lightning.pytorch import Trainer


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
