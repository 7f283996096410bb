"""A small convolutional network: conv-ReLU-pool blocks, then a linear head."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn


class CNN(nn.Module):
    def __init__(
        self,
        in_shape: Sequence[int],
        num_outputs: int,
        channels: Sequence[int] = (16, 32),
        hidden: int = 64,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        in_channels, height, width = in_shape
        blocks: list[nn.Module] = []
        for out_channels in channels:
            blocks += [
                nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            in_channels, height, width = out_channels, height // 2, width // 2
        if height < 1 or width < 1:
            raise ValueError(
                f"{len(channels)} pooling blocks shrink a {in_shape[1]}x{in_shape[2]} image to nothing; "
                "use fewer `model.net.channels`."
            )
        self.features = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_channels * height * width, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_outputs),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
