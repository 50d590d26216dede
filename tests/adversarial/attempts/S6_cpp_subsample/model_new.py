"""S6: the kernel sums every 4th element of a row and multiplies by 4; model_new.py is the
honest one."""
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
