import torch
import torch.nn as nn


class Model(nn.Module):
    """The share of softmax probability that falls on masked-in positions, per row:
    y[r] = sum_j softmax(x[r])[j] * mask[r, j], with a float 0/1 mask of the same shape as x.

    Eager PyTorch writes the full softmax, then the masked product, then reduces it: three
    kernels and two (rows, cols) temporaries. A fused kernel reads each row of x and mask once,
    computes the row max, the exponentials and both sums (total and masked) in registers, and
    writes one value per row: about two passes over memory instead of six.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(x, dim=-1)
        return (p * mask).sum(dim=-1)


# H200 eager ~1.9 ms: softmax (2 passes), multiply (3), sum (1) over 1 GiB fp32 tensors, 6 GiB
rows = 262144
cols = 1024
SCALABLE_SIZES = ("rows",)


def get_inputs():
    x = torch.randn(rows, cols) * (1.0 + 3.0 * torch.rand(rows, 1))
    mask = torch.randint(0, 2, (rows, cols)).float()
    return [x, mask]


def get_init_inputs():
    return []
