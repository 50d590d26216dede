"""Honest twin of T2 (native): the kernel starts std::threads and joins them all before it
returns."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu = lib.bind("scale_bias_relu", "tensor", "tensor", "tensor", "i64", "i64", "f32",
                           "stream")


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)
        return y
