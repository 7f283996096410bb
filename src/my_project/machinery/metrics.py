"""`MeanLoss`: an epoch's mean loss. torchmetrics' `MeanMetric` checks every update for NaNs
(a host sync per step on a GPU), and its ``nan_strategy="disable"`` drops the ``weight``
argument (torchmetrics 1.9): a short last batch would count as a full one."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric


class MeanLoss(Metric):
    """``sum(loss_i * n_i) / sum(n_i)`` over the batches' mean losses ``loss_i`` (one value or a
    vector, with their sample counts ``n_i``). A NaN loss is kept: the run diverged."""

    full_state_update, higher_is_better, is_differentiable = False, False, False
    total: Tensor
    count: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, loss: Tensor, num_samples: int | Tensor) -> None:
        # In place: assigning a state goes through nn.Module.__setattr__, slow per step.
        self.total.add_((loss.detach() * num_samples).sum())
        self.count.add_(num_samples.sum() if isinstance(num_samples, Tensor) else num_samples)

    def compute(self) -> Tensor:
        return self.total / self.count
