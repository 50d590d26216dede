import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x * scale + bias) with a learned per-feature bias: the adversarial suite's main task,
    at a size two CPU cores evaluate in seconds."""

    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + self.bias)


rows = 512
features = 2048


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features, 0.5]
