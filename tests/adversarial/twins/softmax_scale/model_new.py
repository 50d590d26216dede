"""Honest: softmax and scale in one kernel (softmax_scale.py)."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
softmax_scale = lib.bind("softmax_scale", "tensor", "tensor", "i64", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_scale(x, y, rows, cols, self.scale)
        return y
