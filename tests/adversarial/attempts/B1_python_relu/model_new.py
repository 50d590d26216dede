"""B1: a kernel for part of the work and torch for the rest: F.relu inside forward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.kernels import load

lib = load()
scale_bias = lib.bind("scale_bias", "tensor", "tensor", "tensor", "i64", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias(x, self.bias, y, rows, cols, self.scale)
        return F.relu(y)
