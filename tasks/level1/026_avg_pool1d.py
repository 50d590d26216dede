import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """1D average pooling along the last axis of a (batch, channels, length) signal: window 4,
    stride 2, padding 1 (zero padding counted in the divisor), halving the length.

    Each input element falls in two windows; a kernel that keeps a row segment in registers or
    shared memory reads the input once and writes the half-length output once, at memory
    bandwidth.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding)


# H200 eager 3.9 ms (measured): reads 3.2 GB, writes 1.6 GB
batch = 96
channels = 512
length = 16384
SCALABLE_SIZES = ("batch", "channels")


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return [4, 2, 1]
