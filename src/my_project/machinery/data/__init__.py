"""Bases a team's data module may use: `InMemoryDataModule` (splits held as tensors, whole-batch
indexing, resumable mid-epoch) and `ResumableDataLoader`."""
