"""Lightning callbacks of this project (Lightning's own ones are configured in configs/callbacks)."""

from .finite_loss import NonFiniteLossError, StopOnNonFiniteLoss
from .last_checkpoint import LastCheckpoint
from .plots import PlotCallback
from .rng_state import RNGStateCallback

__all__ = [
    "LastCheckpoint",
    "NonFiniteLossError",
    "PlotCallback",
    "RNGStateCallback",
    "StopOnNonFiniteLoss",
]
