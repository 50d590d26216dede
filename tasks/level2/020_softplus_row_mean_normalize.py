import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Positive weights normalised to unit row mean: p = softplus(x, beta), y = p / mean(p) with
    the mean over the last dimension.

    Eager PyTorch writes the softplus result in full, reads it for the row mean, and reads it
    again for the division. A fused kernel keeps a row's softplus values on chip (or recomputes
    them from x), reduces the mean and writes the normalised row once: two passes over memory
    instead of five.
    """

    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = F.softplus(x, beta=self.beta)
        return p / p.mean(dim=-1, keepdim=True)


# H200 eager ~1.6 ms: softplus (2 passes), mean (1), divide (2) over 1 GiB fp32 (65536 x 4096)
rows = 65536
cols = 4096
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols) * (0.5 + torch.rand(rows, 1)) + torch.randn(rows, 1)]


def get_init_inputs():
    return [2.0]
