"""Put this project's strategies into Lightning's StrategyRegistry when every entry point asks
(importing changes nothing): ``dp`` (Lightning 2 removed its own), and `ddp.HydraDDPStrategy`
under every name of Lightning's ``DDPStrategy`` (``ddp``, so ``auto`` with several devices,
``ddp_spawn``, ``ddp_find_unused_parameters_true``...).
"""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy, StrategyRegistry

from .ddp import HydraDDPStrategy
from .dp import DP_NAME, DataParallelStrategy


def register_strategies() -> None:
    """Idempotent: a second call finds everything in place."""
    if DP_NAME not in StrategyRegistry:
        StrategyRegistry.register(DP_NAME, DataParallelStrategy, "one process, forward split")
    for name in list(StrategyRegistry.available_strategies()):
        entry = StrategyRegistry[name]
        if entry["strategy"] is DDPStrategy:
            description = f"{entry['description']}, Hydra-aware"
            StrategyRegistry.register(
                name, HydraDDPStrategy, description, override=True, **entry["init_params"]
            )
