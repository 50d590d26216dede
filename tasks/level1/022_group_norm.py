import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization of an NCHW feature map: 256 channels in 32 groups, learned per-channel affine.

    Statistics are taken per (sample, group) over 8 channels x 128 x 128 = 131072 values. Eager
    reads the input once for the statistics and once more to normalize; a kernel can save the
    second read only if a group fits on chip, so the win is mostly in a faster split reduction
    (many blocks per group, no atomics' order dependence) and a vectorized apply pass.
    """

    def __init__(self, num_groups: int, channels: int, eps: float):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(channels))
            self.norm.bias.copy_(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


# H200 eager ~1.8 ms (measured 2.56 ms): reads 2 GiB twice, writes 2 GiB (2^29 fp32 elements)
batch = 128
channels = 256
height = 128
width = 128
SCALABLE_SIZES = ("batch",)


def get_inputs():
    x = torch.randn(batch, channels, height, width)
    x += torch.randn(batch, channels, 1, 1)
    return [x]


def get_init_inputs():
    return [32, channels, 1e-5]
