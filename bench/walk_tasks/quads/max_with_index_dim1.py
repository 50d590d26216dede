import torch
import torch.nn as nn


class Model(nn.Module):
    """Maximum and its index over dim 1 of an (N, R, L) tensor: values and int64 indices."""

    def forward(self, x):
        values, indices = torch.max(x, dim=1)
        return values, indices


batch = 32
SCALABLE_SIZES = ("batch",)  # --shrink divides the outermost dim alone


def get_inputs():
    return [torch.randn(batch, 512, 1024)]


def get_init_inputs():
    return []
