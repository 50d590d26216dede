import torch
import torch.nn as nn


class Model(nn.Module):
    """Hyperbolic tangent over a (batch, seq, hidden) tensor: y = tanh(x).

    Memory-bound: one read and one write. A kernel wins only by streaming at full bandwidth,
    with a tanh cheap enough (an exp-based formula or the hardware approximation) to stay under
    the bandwidth roofline.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


# H200 eager ~1.2 ms (measured 1.13 ms): one pass reading 2 GiB and writing 2 GiB (2^29 fp32 elements)
batch = 128
seq_len = 1024
hidden = 4096
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, seq_len, hidden).mul_(1.5)]


def get_init_inputs():
    return []
