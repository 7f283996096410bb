"""Strategies: `dp` for Lightning 2, DDP that starts its processes correctly under Hydra, and
exact DDP evaluation.

Nothing is registered on import; `registry.register_strategies()` does it, and every entry
point calls it. The modules import Lightning: keep them out of `my_project/__init__.py`, so
that `python train.py --help` stays instant.
"""
