"""Puts the random number generators in checkpoints, so a resumed run draws the same numbers.

Lightning's checkpoints hold weights, optimizers, schedulers and loop counters, but not the
global RNG states that dropout (and any random augmentation) draw from: without them a
resumed run diverges from an uninterrupted one at the first random draw.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from ..reliability.per_rank import gather_from_ranks, own_entry


def collect_rng_states() -> dict[str, Any]:
    """The global RNG states as plain tensors, lists and tuples (loadable with weights_only)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (
            str(kind),
            torch.from_numpy(np.asarray(keys).astype(np.int64)),
            int(pos),
            int(has_gauss),
            float(cached),
        ),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class RNGStateCallback(Callback):
    """Saves the RNG states with every checkpoint; restores them when training (re)starts.

    Lightning loads callback states before it builds the loops, and more random numbers may be
    drawn in between, so the states are applied at ``on_train_start``, just before the first
    batch is fetched. (The train loader seeds its own generator, see ``data/resumable.py``.)
    Under DDP each process draws its own numbers: the checkpoint holds every process's states
    (``{"ranks": [...]}``) and each gets its own back (`reliability/per_rank.py`).
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        ranks = gather_from_ranks(collect_rng_states())
        return ranks[0] if len(ranks) == 1 else {"ranks": ranks}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if "ranks" in pending:
            own = own_entry(pending["ranks"], trainer.global_rank, trainer.world_size)
            pending = own if own is not None else pending["ranks"][0]
        restore_rng_states(pending)
