"""Whole batches of in-memory tensors by indexing, never sample by sample: a ``DataLoader``
over a ``TensorDataset`` fetches and stacks each sample on its own, which on small models costs
more than the step. Still a standard ``DataLoader`` (Lightning injects its samplers)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.utils.data import TensorDataset


class TensorBatchDataset(TensorDataset):
    """``DataLoader`` calls ``__getitems__`` with a batch's indices (a documented hook of
    ``torch.utils.data``); pair it with ``collate_fn=keep_batch``."""

    def __getitems__(self, indices: list[int]) -> tuple[Tensor, ...]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return tuple(tensor.index_select(0, index) for tensor in self.tensors)


def keep_batch(batch: Any) -> Any:
    """The ``collate_fn`` for `TensorBatchDataset`: its batches are already stacked."""
    return batch
