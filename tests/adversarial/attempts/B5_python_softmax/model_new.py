"""B5: speeds up the trivial part only: a kernel for the final scale, torch.softmax (all of the
real work) left as it was."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_in_place = lib.bind("scale_in_place", "tensor", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, dim=-1)
        scale_in_place(y, y.numel(), self.scale)
        return y
