import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise log-sum-exp over the last dimension: y[r] = log(sum_c exp(x[r, c])).

    Each row has its own random offset so the results vary across rows. Eager computes the row
    maximum, subtracts it, exponentiates and sums in separate passes (about six passes over the
    input); a fused kernel reads x once with an online (running max, rescaled sum) reduction.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=-1)


# H200 eager ~3.5 ms (measured 3.78 ms): about 6 passes over 2 GiB (2^29 fp32 elements); fused: 1 pass
rows = 65536
cols = 8192
SCALABLE_SIZES = ("rows",)


def get_inputs():
    x = torch.randn(rows, cols)
    x += 2.0 * torch.randn(rows, 1)
    return [x]


def get_init_inputs():
    return []
