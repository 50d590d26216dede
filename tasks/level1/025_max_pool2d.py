import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """2D max pooling over an NCHW image batch: 3x3 window, stride 2, padding 1 (the pooling
    after a ResNet stem), halving height and width.

    The windows overlap, so each input element belongs to up to four windows; a good kernel
    reads every input element from HBM once (neighbouring outputs share rows through shared
    memory or cache), writes each output once, and is bound by memory bandwidth.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


# H200 eager 2.9 ms (measured): reads 3.1 GB, writes 0.77 GB
batch = 160
channels = 96
height = 224
width = 224
SCALABLE_SIZES = ("batch", "channels")


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [3, 2, 1]
