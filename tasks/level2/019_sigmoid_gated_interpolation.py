import torch
import torch.nn as nn


class Model(nn.Module):
    """A highway-style gated interpolation between two tensors: g = sigmoid(z + bias),
    y = x + g * (h - x), with a learned per-feature gate bias.

    Eager PyTorch runs five kernels (add, sigmoid, subtract, multiply, add), writing four
    (rows, features) temporaries and reading them back. A fused kernel reads x, h and z once and
    writes y once: four passes over memory instead of thirteen.
    """

    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(z + self.bias)
        return x + g * (h - x)


# H200 eager ~2.0 ms: 13 passes over 512 MiB fp32 tensors (16384 x 8192), 6.5 GiB moved
rows = 16384
features = 8192
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, features), torch.randn(rows, features) + 1.0, torch.randn(rows, features)]


def get_init_inputs():
    return [features]
