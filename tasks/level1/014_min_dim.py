import torch
import torch.nn as nn


class Model(nn.Module):
    """Minimum over the middle dimension of a (batch, reduce, cols) tensor: y[b, c] = min_r x[b, r, c].

    Like the sum over dim 1, the reduction runs across rows rather than along the contiguous
    dimension. Memory-bound: 3 GiB read; a kernel wins by coalesced row reads with per-column
    running minima held in registers.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amin(x, dim=self.dim)


# H200 eager ~0.9 ms (measured 0.72 ms): one pass reading 3 GiB (805M fp32 elements)
batch = 48
reduce_len = 4096
cols = 4096
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, reduce_len, cols)]


def get_init_inputs():
    return [1]
