"""The entry points' flow: check → build → run → record.

`train.py`, `evaluate.py` and `predict.py` are each that sequence; `entry.py` turns one into a
command (Hydra, registrations, signals; Hydra's errors: `hydra_errors.py`), `build.py` makes the
objects from the config (what they refuse, or a bug of the team's: `boundary.py`), `execute.py`
runs them, `record.py` writes what a run leaves behind. The checks of the config alone are
their own room: `machinery/preflight/`.
"""
