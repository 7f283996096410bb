"""Plain `nn.Module` networks: they know shapes, not training. Pick one with `model/net=...`."""

from .cnn import CNN
from .mlp import MLP

__all__ = ["CNN", "MLP"]
