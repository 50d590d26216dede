import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Column scaling written as a product with a dense diagonal matrix, then a bias and GELU:
    y = gelu(x @ torch.diag(d) + bias), with x of shape (n, m), d of length m and a learned bias.

    Eager PyTorch builds the m x m diagonal matrix and runs a full GEMM (2 n m^2 FLOPs, nearly
    all multiplications by zero), then an add and a GELU, each a pass over (n, m). A kernel that
    sees the structure computes gelu(x[i, j] * d[j] + bias[j]) in one elementwise pass, reading x
    once and writing y once.
    """

    def __init__(self, m: int):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(m))

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ torch.diag(d) + self.bias)


# H200 eager ~3.0 ms: dense fp32 GEMM, 137 GFLOP at ~45 TFLOP/s, plus add and gelu over 64 MiB
n = 4096
m = 4096
SCALABLE_SIZES = ("n", "m")


def get_inputs():
    return [torch.randn(n, m), torch.randn(m)]


def get_init_inputs():
    return [m]
