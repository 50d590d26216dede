import torch
import torch.nn as nn


class Model(nn.Module):
    """Each row of 48 scaled to unit length (2M rows, 384 MiB read and written): rows a warp
    covers with a third of its lanes."""

    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


rows = 2097152
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, 48)]


def get_init_inputs():
    return []
