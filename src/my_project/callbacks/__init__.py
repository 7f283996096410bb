"""Lightning callbacks of this project (Lightning's own ones are configured in configs/callbacks)."""

from .device_guard import DeviceGuard, DevicePlacementWarning
from .plots import PlotCallback
from .wandb_checkpoint import WandbBestCheckpoint

__all__ = ["DeviceGuard", "DevicePlacementWarning", "PlotCallback", "WandbBestCheckpoint"]
