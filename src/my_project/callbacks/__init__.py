"""Lightning callbacks of this project (Lightning's own ones are configured in configs/callbacks)."""

from .plots import PlotCallback

__all__ = ["PlotCallback"]
