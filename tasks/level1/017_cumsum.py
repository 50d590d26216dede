import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix sum along each row: y[r, c] = sum_{k <= c} x[r, k].

    A scan rather than a reduction: every output depends on all earlier elements of its row.
    Eager's scan kernel for the innermost dimension does not reach full bandwidth; a kernel
    wins with one block per row (or several rows per block) doing a warp-shuffle scan over
    registers, reading x once and writing y once.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


# H200 eager ~1.2 ms at bandwidth (measured 2.16 ms, the scan kernel is slower): reads 2 GiB, writes 2 GiB (2^29 fp32 elements)
rows = 131072
cols = 4096
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
