"""Base classes and loaders a team's data module may use: `InMemoryDataModule` (splits held
as tensors, whole-batch indexing, batches sliced on the device, resumable mid-epoch)."""
