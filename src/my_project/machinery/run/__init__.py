"""The entry points' flow: check → build → run → record.

`train.py`, `evaluate.py` and `predict.py` are each that sequence; `entry.py` turns one into
a command (Hydra, registrations, signals, one-paragraph errors: `hydra_errors.py`),
`build.py` makes the objects from the config, `execute.py` runs them, `record.py` writes
what a run leaves behind. The checks are their own room: `machinery/preflight/`.
"""
