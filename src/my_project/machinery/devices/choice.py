"""What a Trainer ran on, for every run's `run_info.json` (`run/record.py`). What `auto` becomes
is Lightning's decision (its accelerator connector, in the Trainer's constructor)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import lightning_compat as compat

if TYPE_CHECKING:
    from lightning.pytorch import Trainer


def run_record(trainer: Trainer) -> dict[str, Any]:
    """What ``trainer`` ran on, and the process group torch really had."""
    import torch.distributed as dist

    start_method, backend = compat.ddp_launch(trainer.strategy)
    group = None
    if dist.is_available() and dist.is_initialized():
        group = {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
    devices, device_ids = trainer.num_devices, list(trainer.device_ids)
    # `dp` where nothing can be split (CPU, MPS): one process ran on its first device alone,
    # whatever number was asked (the strategy warns so; the config keeps what was asked).
    if getattr(trainer.strategy, "splits_batches", True) is False:
        devices, device_ids = 1, device_ids[:1]
    return {
        "accelerator": trainer.strategy.root_device.type,  # "cpu", "cuda", "mps", ...
        "devices": devices,  # per node, that ran
        "device_ids": device_ids,
        "strategy": type(trainer.strategy).__name__,  # e.g. "HydraDDPStrategy"
        "start_method": start_method,  # DDP: "popen" (re-runs the script), "spawn" or "fork"
        "backend": backend,  # of multi-process strategies: gloo, nccl, ...
        "num_nodes": trainer.num_nodes,
        "world_size": trainer.world_size,  # processes in all
        "precision": str(trainer.precision),
        "process_group": group,
    }
