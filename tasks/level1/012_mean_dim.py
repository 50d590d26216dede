import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of each row over the last dimension: y[r] = mean_c x[r, c].

    Each row carries its own random offset (standard deviation 3), so the per-row means differ
    well beyond the tolerance. Memory-bound: 3 GiB read, 384 KiB written; a kernel wins by one
    coalesced, vectorized pass with a warp- or block-level reduction per row.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=-1)


# H200 eager ~0.9 ms (measured 0.87 ms): one pass reading 3 GiB (805M fp32 elements)
rows = 98304
cols = 8192
SCALABLE_SIZES = ("rows",)


def get_inputs():
    x = torch.randn(rows, cols)
    x += 3.0 * torch.randn(rows, 1)
    return [x]


def get_init_inputs():
    return []
