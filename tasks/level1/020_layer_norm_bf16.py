import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Layer normalization in bfloat16 over the hidden dimension, with learned scale and shift.

    y = (x - mean) / sqrt(var + eps) * weight + bias per token, statistics taken over 4096
    values; input, weights and output in bf16 (statistics accumulated in fp32). Weights are
    random rather than ones and zeros, so the affine step matters. A kernel wins by holding a
    row in registers, computing mean and variance in one pass, and writing once with 16-byte
    stores.
    """

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


# H200 eager ~1.2 ms (measured 1.55 ms): reads 2 GiB, writes 2 GiB (2^30 bf16 elements)
tokens = 262144
hidden = 4096
SCALABLE_SIZES = ("tokens",)


def get_inputs():
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    x += torch.randn(tokens, 1, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [hidden, 1e-5]
