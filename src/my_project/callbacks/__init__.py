"""Lightning callbacks of this project (Lightning's own ones are configured in configs/callbacks)."""

from .device_guard import DeviceGuard, DevicePlacementWarning
from .finite_loss import NonFiniteLossError, StopOnNonFiniteLoss
from .last_checkpoint import LastCheckpoint
from .plots import PlotCallback
from .rng_state import RNGStateCallback
from .wandb_checkpoint import WandbBestCheckpoint

__all__ = [
    "DeviceGuard",
    "DevicePlacementWarning",
    "LastCheckpoint",
    "NonFiniteLossError",
    "PlotCallback",
    "RNGStateCallback",
    "StopOnNonFiniteLoss",
    "WandbBestCheckpoint",
]
