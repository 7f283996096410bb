"""Random number generator states in every checkpoint, so a resumed run draws the same numbers.

Lightning's checkpoints hold weights, optimizers, schedulers and loop counters, not the global
RNG states that dropout and random augmentation draw from: without them a resumed run
diverges at its first random draw. Lightning's own helpers keep NumPy's state as an array,
which a checkpoint loaded with ``weights_only=True`` refuses; here it is a tensor and numbers.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from lightning.pytorch import LightningModule, Trainer

from ..reliability.per_rank import PerRankState


class RNGStateCallback(PerRankState):
    """Each process's torch, NumPy, Python (and CUDA) states, restored when training starts,
    just before the first batch is fetched (the train loader seeds its own generator:
    `data/resumable.py`), not when the checkpoint is read: numbers are drawn in between."""

    def collect(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, Any]:
        kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
        numpy = (
            str(kind),
            torch.from_numpy(np.asarray(keys).astype(np.int64)),
            int(pos),
            int(has_gauss),
            float(cached),
        )
        states = {"torch": torch.get_rng_state(), "numpy": numpy, "python": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states["cuda"] = torch.cuda.get_rng_state_all()
        return states

    def restore(self, trainer: Trainer, pl_module: LightningModule, state: Any) -> None:
        torch.set_rng_state(state["torch"])
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
