"""Devices and strategies: `dp` for Lightning 2, Hydra-aware DDP, exact DDP evaluation.

Importing this package registers `dp` in Lightning's StrategyRegistry and makes the `ddp`
names use a launcher that works under Hydra (multirun included); import it before building
a Trainer (the model module and train.py do). It imports Lightning: keep it out of
`my_project/__init__.py` so that `python train.py --help` stays instant.
"""

from .ddp import HydraDDPStrategy, end_launched_job
from .dp import DataParallelStrategy, parallel_forward
from .resolve import (
    DeviceChoice,
    check_strategy_and_devices,
    device_choice,
    plan_devices,
    run_record,
    strategy_names,
)
from .samplers import evaluation_sampler

__all__ = [
    "DataParallelStrategy",
    "DeviceChoice",
    "HydraDDPStrategy",
    "check_strategy_and_devices",
    "device_choice",
    "end_launched_job",
    "evaluation_sampler",
    "parallel_forward",
    "plan_devices",
    "run_record",
    "strategy_names",
]
