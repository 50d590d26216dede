import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Exact (erf-based) GELU on transformer MLP activations: y = x * 0.5 * (1 + erf(x / sqrt(2))).

    Memory-bound despite the erf: one read and one write of a (batch, seq, hidden) tensor. A
    kernel wins by keeping the erf cheap enough to stay under the bandwidth roofline and by
    vectorizing loads and stores.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


# H200 eager ~1.2 ms (measured 1.13 ms): one pass reading 2 GiB and writing 2 GiB (2^29 fp32 elements)
batch = 64
seq_len = 2048
hidden = 4096
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, seq_len, hidden).mul_(2.0)]


def get_init_inputs():
    return []
