"""Keeping long runs safe: atomic checkpoints, resume, signals, secrets, run directories.

Only `atomic_io` and `signals` import torch or Lightning at module level.
"""
