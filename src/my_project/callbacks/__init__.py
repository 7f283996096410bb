"""Lightning callbacks of this project (Lightning's own ones are configured in configs/callbacks)."""

from .plots import PlotCallback
from .wandb_checkpoint import WandbBestCheckpoint

__all__ = ["PlotCallback", "WandbBestCheckpoint"]
