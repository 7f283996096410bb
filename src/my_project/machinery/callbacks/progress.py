"""Lightning's TQDM progress bar, or none when ``trainer.enable_progress_bar=false``. It reads
the logged metrics (a host sync) every ``refresh_rate`` batches; the Rich bar after every one."""

from __future__ import annotations

from lightning.pytorch.callbacks import TQDMProgressBar


def progress_bar(enabled: bool = True, refresh_rate: int = 10) -> TQDMProgressBar | None:
    """None when the Trainer's bar is off: Lightning refuses a bar callback then."""
    return TQDMProgressBar(refresh_rate=refresh_rate) if enabled else None
