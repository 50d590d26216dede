import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A 5x5 convolution with bias (padding 2), a 2x2 max pool with stride 2, then a sigmoid.

    Eager PyTorch writes the full-resolution convolution output, reads it for the pool and
    passes over the pooled map once more. A kernel whose output tile covers whole 2x2 windows
    pools in the epilogue and applies the sigmoid (monotone, so it commutes with the max) to a
    quarter of the values, storing only the pooled result.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=5, padding=2)
        with torch.no_grad():  # widen the default init so the sigmoid spans more of (0, 1)
            self.conv.weight.mul_(3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.max_pool2d(self.conv(x), kernel_size=2, stride=2))


# H200 eager 1.5 ms (measured): 54 GFLOP in fp32 without TF32 (0.60 ms with cuDNN's default TF32)
batch = 32
in_channels = 32
out_channels = 64
height = 128
width = 128
SCALABLE_SIZES = ("batch", "in_channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
