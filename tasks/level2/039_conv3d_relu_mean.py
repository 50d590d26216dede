import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3x3 convolution over a volume (padding 1, with bias), ReLU, then the mean over depth,
    height and width: one descriptor per (sample, channel). The input carries a per-(sample,
    channel) offset, so the descriptors depend on the sample.

    Eager PyTorch writes the full 5-D convolution output, then passes over it for the ReLU and
    reads it once more for the mean. A kernel rectifies and sums each output tile in the
    convolution's epilogue and writes only the (batch, out_channels) result.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)).mean(dim=(2, 3, 4))


# H200 eager 1.9 ms (measured): 58 GFLOP in fp32, plus 3 passes over the 256 MiB conv output
batch = 16
in_channels = 16
out_channels = 64
depth = 16
height = 64
width = 64
SCALABLE_SIZES = ("batch", "in_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, depth, height, width)
            + torch.randn(batch, in_channels, 1, 1, 1)]


def get_init_inputs():
    return [in_channels, out_channels]
