"""Put this project's strategies into Lightning's StrategyRegistry, once, on request.

Called by every entry point (`run/entry.py`), never on import: importing a model or a
strategy module changes nothing global.

- ``dp``: :class:`~.dp.DataParallelStrategy` (Lightning 2 removed its own);
- every ``ddp`` name of Lightning's DDPStrategy (``ddp``, ``ddp_find_unused_parameters_*``,
  and so ``auto`` with several devices; ``ddp_spawn``, ``ddp_fork``...):
  :class:`~.ddp.HydraDDPStrategy`, the same strategy with evaluation loaders that see each
  sample once, and, for those that start processes by re-running the script, a launcher
  that works under Hydra (the spawn and fork names keep Lightning's own launcher).
"""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy, StrategyRegistry

from .ddp import HydraDDPStrategy
from .dp import DP_NAME, DataParallelStrategy


def register_strategies() -> None:
    """Idempotent: a second call finds everything in place."""
    if DP_NAME not in StrategyRegistry:
        StrategyRegistry.register(
            DP_NAME,
            DataParallelStrategy,
            description="DataParallel: one process, the forward split across the devices",
        )
    for name in list(StrategyRegistry.available_strategies()):
        entry = StrategyRegistry[name]
        params = dict(entry["init_params"])
        if entry["strategy"] is DDPStrategy:
            StrategyRegistry.register(
                name,
                HydraDDPStrategy,
                description=f"{entry['description']}, Hydra-aware",
                override=True,
                **params,
            )
