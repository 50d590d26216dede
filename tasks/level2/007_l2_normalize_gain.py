import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Row-wise L2 normalisation followed by a learned per-feature gain, as used for normalised
    embeddings: y = x / max(||x||_2, eps) * gain, the norm taken over the last dimension.

    Eager PyTorch computes the row norms (one pass), divides x by them (a second read and a
    write) and multiplies by the gain (another read and write). A fused kernel reads a row once,
    reduces its sum of squares in registers, and writes the scaled row once: two passes over
    memory instead of five.
    """

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.gain = nn.Parameter(dim ** 0.5 * (1.0 + 0.2 * torch.randn(dim)))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2.0, dim=-1, eps=self.eps) * self.gain


# H200 eager ~1.6 ms: norm (1 pass), divide (2), multiply (2) over 1 GiB fp32 (2^20 x 256)
rows = 1048576
dim = 256
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, dim) * (0.1 + 2.0 * torch.rand(rows, 1)) + 0.3]


def get_init_inputs():
    return [dim, 1e-12]
