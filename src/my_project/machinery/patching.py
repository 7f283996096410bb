"""`Patch`: an attribute of a library replaced while at least one user needs it.

The machinery changes a few things inside Lightning that Lightning has no switch for (see
`callbacks/lean_steps.py` and `strategies/samplers.py`, each patch with its reason). A patch
is put in place when the first Trainer that needs it starts, taken out when the last one
stops, and is safe to enter from nested or concurrent runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_MISSING = object()


class Patch:
    """``setattr(owner, name, make(original))`` while entered; the original back after."""

    def __init__(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self.owner, self.name, self.make = owner, name, make
        self._lock = threading.Lock()
        self._users = 0
        self._original: Any = _MISSING

    def enter(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                # The owner's own attribute (a class's __dict__), not an inherited one, so
                # that taking the patch out restores exactly what was there.
                self._original = vars(self.owner).get(self.name, _MISSING)
                current = getattr(self.owner, self.name)
                setattr(self.owner, self.name, self.make(current))

    def exit(self) -> None:
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                if self._original is _MISSING:
                    delattr(self.owner, self.name)
                else:
                    setattr(self.owner, self.name, self._original)
                self._original = _MISSING
