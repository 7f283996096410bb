"""`trainer.<any Trainer argument>=value` on the command line, without Hydra's `+`.

Hydra refuses an override of a key its config does not have unless it is written `+key=...`,
so `trainer.num_sanity_val_steps=0` was refused although it is a `lightning.Trainer` argument.
An override ``trainer.X=V`` whose ``X`` is an argument of ``lightning.Trainer`` and not a key of
configs/trainer/default.yaml (which every trainer preset extends) is rewritten ``++trainer.X=V``
before Hydra composes. Anything else is left to Hydra, so a misspelt key
(``trainer.max_epoch=3``) is still refused, with the closest names (`hydra_errors.py`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence

from ..config import config_dir


def with_trainer_arguments(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with ``trainer.X=V`` as ``++trainer.X=V`` where needed (see above)."""
    from omegaconf import OmegaConf

    listed: set[str] | None = None
    rewritten = []
    for override in overrides:
        key, equals, _ = override.partition("=")
        name = key.removeprefix("trainer.") if key.startswith("trainer.") else ""
        if equals and name and "." not in name and not name.startswith("_"):
            if listed is None:  # read once, only when the command line sets the trainer
                preset = config_dir() / "trainer" / "default.yaml"
                listed = {str(k) for k in OmegaConf.load(preset)} if preset.is_file() else set()
            if name not in listed and name in trainer_parameters():
                override = "++" + override
        rewritten.append(override)
    return rewritten


@functools.cache
def trainer_parameters() -> frozenset[str]:
    """The arguments of ``lightning.Trainer`` (imports Lightning: asked only when needed)."""
    from lightning.pytorch import Trainer

    return frozenset(list(inspect.signature(Trainer.__init__).parameters)[1:])
