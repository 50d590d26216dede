import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of a tall-skinny matrix and a short-wide one, C = A @ B with A of shape (m, k)
    and B of shape (k, n) for a small inner dimension k: a rank-k update writing a large
    output.

    With k = 64 every output element takes only 64 multiply-adds, so the operands fit in shared
    memory whole and the cost is split between the FMAs and writing the large C; a kernel tuned
    for this shape loads a B panel once per block and streams C out with wide stores, where a
    square-tuned GEMM wastes its pipeline on the short reduction.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


# H200 eager 2.0 ms (measured): 69 GFLOP with a short k, plus writing a 2.1 GB output
m = 32768
n = 16384
k = 64
SCALABLE_SIZES = ("m", "n")


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
