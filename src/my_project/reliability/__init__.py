"""Keeping long runs safe: atomic checkpoints, resume, signals, input checks, secrets.

Nothing here imports torch at module level except where a module's job needs it
(`atomic_io`, `checks`), so the entry points stay light until training starts.
"""
