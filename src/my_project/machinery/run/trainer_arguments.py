"""`trainer.<any Trainer argument>=value` on the command line, without Hydra's `+`.

The trainer presets (configs/trainer/) list the arguments a project usually sets; Hydra
refuses an override of a key its config does not have ("not in struct") unless it is written
`+trainer.x=...`, so `trainer.num_sanity_val_steps=0` was refused although it is a
`lightning.Trainer` argument. Before Hydra composes, an override ``trainer.X=V`` whose ``X`` is
an argument of ``lightning.Trainer`` and not in the presets' base (configs/trainer/default.yaml,
which every preset extends) is rewritten as ``++trainer.X=V`` (set, or add). Anything else is
left to Hydra, so a misspelt key (``trainer.max_epoch=3``) is still refused, with the closest
names (`hydra_errors.py`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence

from ..config import config_dir

PREFIX = "trainer."


def with_trainer_arguments(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with ``trainer.X=V`` as ``++trainer.X=V`` where X is a Trainer argument
    the presets' base does not list (see the module docstring)."""
    listed: set[str] | None = None
    rewritten = []
    for override in overrides:
        key, equals, _ = override.partition("=")
        name = key[len(PREFIX) :] if key.startswith(PREFIX) else ""
        if equals and name and "." not in name and not name.startswith("_"):
            if listed is None:
                listed = preset_keys()
            if name not in listed and name in trainer_parameters():
                override = "++" + override
        rewritten.append(override)
    return rewritten


def preset_keys() -> set[str]:
    """The keys of configs/trainer/default.yaml, which every trainer preset extends."""
    from omegaconf import OmegaConf

    path = config_dir() / "trainer" / "default.yaml"
    if not path.is_file():
        return set()
    return {str(key) for key in OmegaConf.load(path)}


@functools.cache
def trainer_parameters() -> frozenset[str]:
    """The arguments of ``lightning.Trainer`` (imports Lightning, so only asked for an
    override the presets do not list)."""
    from lightning.pytorch import Trainer

    parameters = list(inspect.signature(Trainer.__init__).parameters)[1:]
    return frozenset(parameters)
