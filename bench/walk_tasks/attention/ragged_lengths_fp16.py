import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention whose lengths are no multiple of the kernel's 64-row tiles: 1000 queries over
    777 keys, head dim 64, a value dim of 32, in float16. The last tile of queries and of keys is
    part padding, which must score -inf and store nothing."""

    def forward(self, q, k, v):
        return torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / 8.0, dim=-1) @ v


batch = 16
SCALABLE_SIZES = ("batch",)


def get_inputs():
    # Q and K at half scale: verify's spiked set (one element 50 times the largest) then moves a
    # score by less than one float16 step of eager's rounding can tip past the tolerance.
    return [(0.5 * torch.randn(batch, 8, 1000, 64)).half(),
            (0.5 * torch.randn(batch, 8, 777, 64)).half(), torch.randn(batch, 8, 777, 32).half()]


def get_init_inputs():
    return []
