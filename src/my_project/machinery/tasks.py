"""What outputs and targets say about the task (plots, `predict.py`): a binary classifier's one
value a sample (targets 0 or 1: logits when any output is outside [0, 1]), or something else."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


def is_binary_labels(targets: Tensor | None) -> bool:
    """Targets of one value a sample, each 0 or 1 (integers or floats)."""
    if targets is None or targets.dim() != 1 or not len(targets):
        return False
    return bool(((targets == 0) | (targets == 1)).all())


def binary_probabilities(outputs: Tensor, targets: Tensor | None) -> Tensor | None:
    """The probability of class 1 for each sample of a binary classifier's outputs; else None."""
    per_sample = outputs.reshape(len(outputs), -1)
    if per_sample.shape[1] != 1 or not is_binary_labels(targets):
        return None
    values = per_sample[:, 0].float()
    return values.sigmoid() if bool(((values < 0) | (values > 1)).any()) else values
