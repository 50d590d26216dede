import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-row standardisation with outlier clipping: y = clamp((x - mean) / (std + eps), -c, c),
    where mean and the unbiased std are taken over the last dimension.

    Eager PyTorch runs a mean reduction, a std reduction, a subtract, an add, a divide and a
    clamp, each kernel reading and most writing a full (rows, cols) tensor. A fused kernel reads
    a row once, reduces mean and variance together (Welford or two sums), and writes the clipped
    standardised row once: two passes over memory instead of about eight.
    """

    def __init__(self, eps: float, clip: float):
        super().__init__()
        self.eps = eps
        self.clip = clip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        std = x.std(dim=-1, keepdim=True)
        return torch.clamp((x - mean) / (std + self.eps), -self.clip, self.clip)


# H200 eager ~2.5 ms: mean (1 pass), std (1), subtract (2), divide (2), clamp (2) over 1 GiB fp32
rows = 65536
cols = 4096
SCALABLE_SIZES = ("rows",)


def get_inputs():
    x = torch.randn(rows, cols) * (0.2 + 3.0 * torch.rand(rows, 1)) + 4.0 * torch.randn(rows, 1)
    return [x]


def get_init_inputs():
    return [1e-5, 2.5]
