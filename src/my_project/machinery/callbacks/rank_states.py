"""Each process resumes with its own state, which Lightning's checkpoints (rank 0's) lack.

Gathered from every process into the checkpoint and given back to each when training starts:
the RNG states, which Lightning does not checkpoint; in a mid-epoch checkpoint, the torchmetrics
states, which torchmetrics keeps out of checkpoints; under DDP every other callback's state (a
best checkpoint chosen on a value each process logged). Not when the process count changed:
a run then resumes from an epoch's end only (a mid-epoch one is refused before it starts,
`preflight/checkpoint.py`), and says its random numbers start afresh.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning_utilities.core.apply_func import apply_to_collection
from torchmetrics import Metric

from ..distributed import gather_from_ranks


class PerRankState(Callback):
    def __init__(self) -> None:
        self._ranks: list[dict[str, Any]] | None = None  # from the checkpoint, until restored

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        state: dict[str, Any] = {"rng": _rng_states(), "metrics": {}, "callbacks": {}}
        if not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:  # else they restart
            for name, metric in pl_module.named_modules():
                if isinstance(metric, Metric):
                    state["metrics"][name] = {k: _to(v) for k, v in metric.metric_state.items()}
        callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
        for callback in callbacks if trainer.world_size > 1 else []:
            if callback is not self and (callback_state := callback.state_dict()):
                state["callbacks"][callback.state_key] = callback_state
        checkpoint.setdefault("callbacks", {})[self.state_key] = {"ranks": gather_from_ranks(state)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._ranks = state_dict.get("ranks")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        ranks, self._ranks = self._ranks, None
        if ranks and len(ranks) != trainer.world_size:  # from an epoch's end (`preflight`)
            if trainer.is_global_zero:
                print(
                    f"Note: the checkpoint was saved by {len(ranks)} process"
                    f"{'es' if len(ranks) != 1 else ''} and this run has {trainer.world_size}: "
                    "each process's random numbers start from `seed`, not from the checkpoint, so "
                    "the run goes on exactly from the epoch's end, but draws other numbers than "
                    "one that never changed devices.",
                    file=sys.stderr,
                    flush=True,
                )
            return
        if not ranks:
            return
        state, modules = ranks[trainer.global_rank], dict(pl_module.named_modules())
        for name, values in state["metrics"].items():
            if isinstance(metric := modules.get(name), Metric):
                for key, value in values.items():
                    setattr(metric, key, _to(value, metric.device))
        callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
        for callback in callbacks:
            if callback.state_key in state["callbacks"]:
                callback.load_state_dict(state["callbacks"][callback.state_key])
        _set_rng_states(state["rng"])


def _rng_states() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    numpy = (str(kind), torch.from_numpy(np.asarray(keys, np.int64)), pos, has_gauss, cached)
    states = {"torch": torch.get_rng_state(), "numpy": numpy, "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _to(value: Any, device: Any = "cpu") -> Any:
    """A copy of a metric state (a tensor or a list of them) on ``device``."""
    return apply_to_collection(value, torch.Tensor, lambda t: t.detach().to(device, copy=True))
