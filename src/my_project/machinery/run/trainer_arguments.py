"""`trainer.<any Trainer argument>=value` on the command line, without Hydra's `+`.

Every ``trainer.X=V`` is passed on as ``++trainer.X=V`` (set, or add): the Trainer itself refuses
an argument it does not take, naming it (``trainer.max_epoch=3``: `run/boundary.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def with_trainer_arguments(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with each ``trainer.X=V`` as ``++trainer.X=V``."""
    return ["++" + o if re.match(r"trainer\.\w+=", o) else o for o in overrides]
