"""The entry points' flow: check → build → run → record.

`train.py`, `evaluate.py` and `predict.py` are each that sequence; `entry.py` makes one a
command, `build.py` makes the objects (`boundary.py`: what they refuse), `execute.py` runs them,
`record.py` writes what a run leaves behind. The checks are in `machinery/preflight/`.
"""
