"""Strategies: `dp` for Lightning 2, DDP under Hydra with exact evaluation; registered by
`registry.register_strategies()`, never on import."""
