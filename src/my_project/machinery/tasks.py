"""What a module's outputs and a data set's targets say about the task, for any module:
the plots and `predict.py` read outputs as class scores, a binary classifier's one value, or
a regression's numbers.

- classification: several values a sample (one score per class), integer targets;
- binary classification with one output: one value a sample and targets that are all 0 or 1
  (``BCEWithLogitsLoss`` and float 0/1 targets, the common binary pattern). Outputs outside
  [0, 1] are logits (the probability is their sigmoid); outputs all within [0, 1] are
  probabilities (a sigmoid in ``forward``);
- regression: one value a sample, other targets.
"""

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
    """The probability of class 1 for each sample, when ``outputs`` (one value a sample) and
    ``targets`` are a binary classifier's; None otherwise."""
    per_sample = outputs.reshape(len(outputs), -1)
    if per_sample.shape[1] != 1 or not is_binary_labels(targets):
        return None
    values = per_sample[:, 0].float()
    if bool(((values < 0) | (values > 1)).any()):
        return values.sigmoid()  # logits
    return values
