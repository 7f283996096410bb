"""The learning-rate schedules the config names, tried before anything of the run is written.

A schedule can fail only once it is stepped (``T_max=0`` divides by zero after the first epoch).
Each of torch's schedules in the model's config is built on a throwaway optimizer and stepped
as often as the run steps it at least (the fewer of ``max_epochs`` and ``max_steps``, <= 100).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator, Mapping
from typing import Any


def schedule_nodes(node: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(key, config) of every torch schedule under ``node`` (resolved config data)."""
    if not isinstance(node, Mapping):
        return
    if str(node.get("_target_", "")).startswith("torch.optim.lr_scheduler."):
        yield path, node
    for key, value in node.items():
        yield from schedule_nodes(value, f"{path}.{key}")


def try_schedule(node: Mapping[str, Any], trainer: Mapping[str, Any]) -> None:
    """Build the schedule ``node`` configures and step it; one that needs more than plain values
    (another schedule, a function) is left to the run."""
    import torch
    from hydra.utils import get_class

    cls = get_class(str(node["_target_"]))
    parameters = dict(list(inspect.signature(cls).parameters.items())[1:])  # not `optimizer`
    kwargs = {k: v for k, v in node.items() if k in parameters}
    needed = [
        n
        for n, p in parameters.items()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    nested = [item for v in kwargs.values() for item in (v if isinstance(v, list) else [v])]
    if any(n not in kwargs for n in needed) or any(isinstance(v, Mapping) for v in nested):
        return
    given = (trainer.get("max_epochs"), trainer.get("max_steps"))
    steps = min([*(v for v in given if isinstance(v, int) and v >= 0), 100])
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"
        scheduler = cls(optimizer, **kwargs)
        plateau = isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
        for _ in range(steps):
            if plateau:
                scheduler.step(0.0)  # a metric that never improves: the most it reduces
            else:
                scheduler.step()
