import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-row weighted squared distance between two batches of vectors (a diagonal Mahalanobis
    distance): y[r] = sum_j w[j] * (a[r, j] - b[r, j])^2, with learned positive weights w.

    Eager PyTorch runs a subtract, a square, a multiply and a sum, writing three full
    (rows, cols) temporaries. A fused kernel reads a and b once, accumulates the weighted squares
    in registers and writes one value per row: two passes over memory instead of eight.
    """

    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(0.2 + torch.rand(cols))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        d = a - b
        return (d.pow(2) * self.weight).sum(dim=-1)


# H200 eager ~2.5 ms: sub (3 passes), pow (2), mul (2), sum (1) over 1 GiB fp32 tensors, 8 GiB
rows = 131072
cols = 2048
SCALABLE_SIZES = ("rows",)


def get_inputs():
    a = torch.randn(rows, cols) * (0.2 + torch.rand(rows, 1))
    b = torch.randn(rows, cols) * (0.2 + torch.rand(rows, 1))
    return [a, b]


def get_init_inputs():
    return [cols]
