"""Lightning 2.6's ``EMAWeightAveraging``, testing the averaged weights after fit too."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import EMAWeightAveraging
from lightning.pytorch.trainer.states import TrainerFn


class EMAWeights(EMAWeightAveraging):
    """Lightning's EMA of the weights, with one change: Lightning 2.6 restores callbacks
    whenever a checkpoint is loaded, so testing the best checkpoint after fit (train.py does)
    would put the *trained* weights back over the averaged ones, and train.py's test metrics
    would not be eval.py's on the same file. Outside fit the checkpoint's average stays.
    """

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)
