import torch
import torch.nn as nn


class Model(nn.Module):
    """The sum from each element to the end of dim 1 of (batch, 2048, 128), scaled by a weight
    per position of the last dim after the scan: rows 128 elements apart, walked from their
    ends, with an input read after the scan."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(128) + 0.5)

    def forward(self, x):
        return torch.cumsum(x.flip(1), dim=1).flip(1) * self.scale


batch = 512
SCALABLE_SIZES = ("batch",)  # --shrink divides the outermost dim alone


def get_inputs():
    return [torch.randn(batch, 2048, 128)]


def get_init_inputs():
    return []
