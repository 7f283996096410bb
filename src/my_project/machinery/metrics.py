"""`MeanLoss`: the mean loss of an epoch, a metric torchmetrics does not quite give.

torchmetrics' `MeanMetric` checks every update for NaNs with ``if nans.any()`` (a host sync
per training step on a GPU), and its ``nan_strategy="disable"`` drops the ``weight`` argument
(torchmetrics 1.9), so a smaller last batch would count as much as a full one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric


class MeanLoss(Metric):
    """Mean of per-batch mean losses over all samples seen: ``sum(loss_i * n_i) / sum(n_i)``.

    ``update`` takes one batch's loss and size, or a vector of losses and one of sizes. A NaN
    loss is kept (the epoch's mean becomes NaN: the run diverged) rather than dropped.
    """

    full_state_update = False
    higher_is_better = False
    is_differentiable = False

    total: Tensor
    count: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, loss: Tensor, num_samples: int | Tensor) -> None:
        # In place: assigning a state goes through nn.Module.__setattr__, slow per step.
        if isinstance(num_samples, Tensor):
            self.total.add_((loss.detach() * num_samples).sum())
            self.count.add_(num_samples.sum())
        else:
            self.total.add_(loss.detach() * num_samples)
            self.count.add_(num_samples)

    def compute(self) -> Tensor:
        return self.total / self.count
