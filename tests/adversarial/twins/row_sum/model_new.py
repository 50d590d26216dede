"""Honest: the sum over the last dimension in one kernel (row_sum.py)."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
row_sum = lib.bind("row_sum", "tensor", "tensor", "i64", "i64", "stream")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        row_sum(x, y, rows, cols)
        return y
