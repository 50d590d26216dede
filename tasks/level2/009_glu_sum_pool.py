import torch
import torch.nn as nn


class Model(nn.Module):
    """A gated linear unit over the feature dimension followed by sum pooling over the sequence:
    with x = [a, g] split in half along the last dimension, y[b, d] = sum_t a[b, t, d] * sigmoid(g[b, t, d]).

    Eager PyTorch runs the sigmoid and the product as two kernels, each writing a
    (batch, seq, dim) temporary, and then a sum reduction that reads the product back. A fused
    kernel reads each half of x once, gates in registers and accumulates the sum over the
    sequence, writing only the (batch, dim) result: it moves a third of eager's bytes.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, g = x.chunk(2, dim=-1)
        return (a * torch.sigmoid(g)).sum(dim=1)


# H200 eager ~1.9 ms: sigmoid (2 x 1 GiB), multiply (3), sum (1) over a 2 GiB fp32 input, 6 GiB
batch = 32
seq = 4096
dim = 2048
SCALABLE_SIZES = ("batch", "seq")


def get_inputs():
    return [torch.randn(batch, seq, 2 * dim)]


def get_init_inputs():
    return []
