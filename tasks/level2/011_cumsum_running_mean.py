import torch
import torch.nn as nn


class Model(nn.Module):
    """The running mean along each row: y[r, t] = (x[r, 0] + ... + x[r, t]) / (t + 1), written as
    a cumulative sum divided by the position index.

    Eager PyTorch writes the full cumulative sum, builds the positions with arange and divides in
    a second kernel that reads the sum back. A fused scan divides each prefix sum by its position
    before storing it: two passes over memory instead of four.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        positions = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return torch.cumsum(x, dim=-1) / positions


# H200 eager ~1.3 ms: cumsum (2 passes) and divide (2) over 1 GiB fp32 (16384 x 16384)
rows = 16384
length = 16384
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, length) + 2.0 * torch.randn(rows, 1)]


def get_init_inputs():
    return []
