import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Instance normalization of an NCHW feature map with a learned per-channel affine.

    Each (sample, channel) plane of 256 x 256 values is normalized by its own mean and variance,
    then scaled and shifted per channel. Eager reshapes to a batch norm over N*C channels and
    reads the input twice (statistics, then apply); a kernel wins with a faster per-plane
    reduction and a vectorized apply pass.
    """

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)


# H200 eager ~1.8 ms (measured 1.77 ms): reads 2 GiB twice, writes 2 GiB (2^29 fp32 elements)
batch = 64
channels = 128
height = 256
width = 256
SCALABLE_SIZES = ("batch",)


def get_inputs():
    x = torch.randn(batch, channels, height, width)
    x *= 0.5 + 2.0 * torch.rand(batch, channels, 1, 1)
    return [x]


def get_init_inputs():
    return [channels, 1e-5]
