"""Rebuild a LightningModule from its checkpoint alone (its saved hyperparameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import UserError

if TYPE_CHECKING:
    from lightning.pytorch import LightningModule


def load_model(target: str, ckpt_path: str) -> LightningModule:
    """Load ``ckpt_path`` into the LightningModule class named by ``target`` (on the CPU).

    A file that is not such a checkpoint becomes a :class:`UserError` naming what to pass.
    """
    from hydra.utils import get_class
    from lightning.pytorch import LightningModule

    model_class = get_class(target)
    if not issubclass(model_class, LightningModule):
        raise UserError(f"model._target_={target} is not a LightningModule.")
    try:
        return model_class.load_from_checkpoint(ckpt_path, map_location="cpu")
    except (KeyError, RuntimeError, TypeError) as error:
        raise UserError(
            f"{ckpt_path} is not a checkpoint of {model_class.__name__} ({type(error).__name__}: "
            f"{error}). Pass a checkpoint written by this project's train.py."
        ) from error
