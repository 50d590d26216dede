import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cosine-similarity loss per row, 1 - cos(x1_i, x2_i), over pairs of 512-dimensional
    embeddings.

    Eager computes the two norms and the dot product as separate reductions with normalised
    temporaries; a fused kernel reads each pair of rows once, accumulating x1.x2, |x1|^2 and
    |x2|^2 together, and writes one float per row.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return 1.0 - F.cosine_similarity(x1, x2, dim=1)


# H200 eager 3.3 ms (measured): several passes over two 1.1 GB tensors
rows = 524288
dim = 512
SCALABLE_SIZES = ("rows",)


def get_inputs():
    # x2 is correlated with x1 by a per-row coefficient in (-1, 1), so the losses spread over
    # (0, 2) instead of all sitting near 1 as for independent vectors.
    x1 = torch.randn(rows, dim)
    c = torch.rand(rows, 1) * 2 - 1
    x2 = c * x1 + (1 - c * c).sqrt() * torch.randn(rows, dim)
    return [x1, x2]


def get_init_inputs():
    return []
