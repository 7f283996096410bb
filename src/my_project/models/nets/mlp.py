"""A multilayer perceptron over flattened inputs (images, or rows of features)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn


class MLP(nn.Module):
    def __init__(
        self,
        in_shape: Sequence[int],
        num_outputs: int,
        hidden: Sequence[int] = (128, 64),
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(in_shape)
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, num_outputs))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)
