import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization written with elementwise torch ops: y = x * rsqrt(mean(x^2) + eps) * weight.

    Eager runs square, mean, add+rsqrt, and two multiplies, each a separate kernel, with a full
    size temporary for x^2 and for each product: about seven passes over x. A fused kernel reads
    each row once (kept in registers), reduces the sum of squares, and writes y once.
    """

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms_inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms_inv * self.weight


# H200 eager ~2.1 ms (measured 2.35 ms): about 7 passes over 1 GiB (2^28 fp32 elements); fused: 2 passes
tokens = 65536
hidden = 4096
SCALABLE_SIZES = ("tokens",)


def get_inputs():
    x = torch.randn(tokens, hidden)
    x *= 0.5 + 2.0 * torch.rand(tokens, 1)
    return [x]


def get_init_inputs():
    return [hidden, 1e-6]
