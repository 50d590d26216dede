import torch
import torch.nn as nn


class Model(nn.Module):
    """A maxout layer with centred outputs: a linear layer to groups * pieces features, the max
    over each group's pieces, then the per-row mean of the group maxima subtracted,
    y = m - mean(m, dim=1) with m = max(x @ W^T + b viewed as (batch, groups, pieces), dim=2).

    Eager PyTorch writes the full (batch, groups * pieces) GEMM output and reads it back for the
    max, then passes twice more over the maxima; a kernel reduces each group's pieces in the GEMM
    epilogue (a group's pieces are adjacent columns of one output tile), storing a quarter of the
    data, and centres each row with a small row reduction.
    """

    def __init__(self, in_features: int, groups: int, pieces: int):
        super().__init__()
        self.groups = groups
        self.pieces = pieces
        self.linear = nn.Linear(in_features, groups * pieces)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x).view(x.shape[0], self.groups, self.pieces)
        m = y.max(dim=2).values
        return m - m.mean(dim=1, keepdim=True)


# H200 eager 3.1 ms (measured): 137 GFLOP in fp32 (no TF32), plus ~0.2 GB for max and centring
batch = 8192
in_features = 2048
groups = 1024
pieces = 4
SCALABLE_SIZES = ("batch", "in_features", "groups")


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, groups, pieces]
