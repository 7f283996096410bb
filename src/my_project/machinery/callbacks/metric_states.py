"""Each DDP process's torchmetrics states in checkpoints, restored to the same process.

Lightning saves the module's weights and buffers, metric states included, from the process of
rank 0 only, so in a resumed DDP run every process starts from rank 0's metric states: the
metrics of the interrupted epoch count rank 0's part of the data once per process and lose
the others'. This keeps each process's own states (those the module keeps in checkpoints:
persistent ones, ``metric.persistent(True)``) and gives them back, for any LightningModule.
In one process it adds nothing to the checkpoint.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from torchmetrics import Metric

from ..reliability.per_rank import gather_from_ranks, own_entry


def persistent_metric_states(module: torch.nn.Module) -> dict[str, Any]:
    """``{"<metric path>.<state>": value}`` of every persistent metric state, on the CPU."""
    states: dict[str, Any] = {}
    for path, metric in module.named_modules():
        if not isinstance(metric, Metric):
            continue
        for name in metric._defaults:
            if metric._persistent.get(name):
                value = getattr(metric, name)
                states[f"{path}.{name}"] = (
                    [v.detach().cpu() for v in value]
                    if isinstance(value, list)
                    else value.detach().cpu()
                )
    return states


def load_metric_states(module: torch.nn.Module, states: dict[str, Any]) -> None:
    metrics = {path: m for path, m in module.named_modules() if isinstance(m, Metric)}
    for key, value in states.items():
        path, _, name = key.rpartition(".")
        metric = metrics.get(path)
        if metric is None or name not in metric._defaults:
            continue
        device = metric.device
        setattr(
            metric,
            name,
            [v.to(device) for v in value] if isinstance(value, list) else value.to(device),
        )
        metric._computed = None


class MetricStatesPerRank(Callback):
    def __init__(self) -> None:
        self._module: LightningModule | None = None
        self._pending: list[dict[str, Any]] | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._module = pl_module

    def state_dict(self) -> dict[str, Any]:
        if self._module is None:
            return {}
        ranks = gather_from_ranks(persistent_metric_states(self._module))
        return {"ranks": ranks} if len(ranks) > 1 else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("ranks")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        pending, self._pending = self._pending, None
        if not pending:
            return
        states = own_entry(pending, trainer.global_rank, trainer.world_size)
        if states is None:
            rank_zero_warn(
                f"The checkpoint holds the metric states of {len(pending)} processes, this run "
                f"has {trainer.world_size}: the metrics of the interrupted epoch start from "
                "rank 0's states."
            )
            return
        load_metric_states(pl_module, states)
