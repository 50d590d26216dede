import torch
import torch.nn as nn


class Model(nn.Module):
    """The pre-norm transformer's fused add and RMS norm: h = x + residual, y = h * rsqrt(mean(h^2)
    + eps) * weight; returns both y (the next sublayer's input) and h (the new residual stream).

    Eager PyTorch runs the add, the square, the mean, the rsqrt and two multiplies as separate
    kernels, writing the sum, its square and two products in full. A fused kernel reads x and
    the residual once per row, writes h, reduces the sum of squares in registers and writes y:
    four passes over memory instead of about eleven.
    """

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.3 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = x + residual
        inv_rms = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return h * inv_rms * self.weight, h


# H200 eager ~1.8 ms: about 11 passes over 512 MiB fp32 tensors (32768 x 4096), 5.5 GiB moved
tokens = 32768
hidden = 4096
SCALABLE_SIZES = ("tokens",)


def get_inputs():
    x = torch.randn(tokens, hidden) * (0.3 + torch.rand(tokens, 1))
    residual = torch.randn(tokens, hidden) * (0.5 + 2.0 * torch.rand(tokens, 1))
    return [x, residual]


def get_init_inputs():
    return [hidden, 1e-6]
