"""Honest: the mean over the last dimension in one kernel (row_mean.py)."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
row_mean = lib.bind("row_mean", "tensor", "tensor", "i64", "i64", "stream")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        row_mean(x, y, rows, cols)
        return y
