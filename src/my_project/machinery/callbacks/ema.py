"""Lightning 2.6's ``EMAWeightAveraging``, testing the averaged weights after fit too."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import EMAWeightAveraging
from lightning.pytorch.trainer.states import TrainerFn


class EMAWeights(EMAWeightAveraging):
    """An exponential moving average of the weights, as Lightning keeps it: validated on the
    average, checkpointed with the average as ``state_dict`` and the trained weights and the
    average's state beside it (``current_model_state``, ``averaging_state``), so a resumed fit
    continues exactly.

    One change, for the stages after fit: Lightning 2.6 restores callbacks whenever a
    checkpoint is loaded, and after a fit this callback still holds its average, so testing
    the best checkpoint in the same run (train.py does) puts the *trained* weights back over
    the averaged ones Lightning had just loaded: train.py's test metrics would not be those of
    eval.py on the same file. Outside fit the checkpoint's ``state_dict``, the average, stays.
    """

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)
