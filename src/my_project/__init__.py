"""my_project: a PyTorch Lightning project configured with Hydra.

Kept import-light on purpose: `python train.py --help` must not pay for torch.
"""

__version__ = "0.1.0"
