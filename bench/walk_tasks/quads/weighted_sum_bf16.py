import torch
import torch.nn as nn


class Model(nn.Module):
    """A bfloat16 (N, C, H, W) tensor times a per-(C, H) weight, summed over C, then scaled per
    W: inputs the same for four neighbouring rows (the weight), and read once a row (the
    scale)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(64, 32, 1).to(torch.bfloat16))
        self.scale = nn.Parameter(torch.randn(256).to(torch.bfloat16))

    def forward(self, x):
        return (x * self.weight).sum(dim=1) * self.scale


batch = 64
SCALABLE_SIZES = ("batch",)  # --shrink divides the outermost dim alone


def get_inputs():
    return [torch.randn(batch, 64, 32, 256).to(torch.bfloat16)]


def get_init_inputs():
    return []
