"""Keeping long runs safe: atomic checkpoints, resume, signals, secrets, run directories,
state kept per DDP process.

Nothing here imports torch or Lightning at module level except where a module's job needs it
(`atomic_io`, `signals`), so the entry points stay light until training starts.
"""
