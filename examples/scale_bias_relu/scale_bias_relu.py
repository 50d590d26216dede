import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales the input, adds a learned per-feature bias and applies ReLU: relu(x * scale + bias).

    Eager PyTorch runs three passes over the tensor (multiply, add, ReLU) and allocates two
    temporaries; a fused kernel reads x once and writes y once.
    """

    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + self.bias)


rows = 4096
features = 2048
# What `--shrink K` may divide for a smaller run (tasks/README.md): the rows, not the features
# the bias is sized by.
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features, 0.5]
