"""Keeping long runs safe: atomic checkpoints, resume, signals, secrets, run directories.

Nothing here imports torch at module level except where a module's job needs it
(`atomic_io`), so the entry points stay light until training starts.
"""
