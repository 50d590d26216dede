"""Honest: relu(x) * scale in one kernel (relu_scale*.py tasks)."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
relu_scale = lib.bind("relu_scale", "tensor", "tensor", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_scale(x, y, x.numel(), self.scale)
        return y
