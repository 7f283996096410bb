"""Data modules: digits (bundled, the default) and MNIST (IDX files, downloaded when missing)."""
