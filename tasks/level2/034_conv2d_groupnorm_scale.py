import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A 3x3 convolution with bias, group norm (32 groups, with affine) and a learned per-channel
    scale: y = GroupNorm(conv(x)) * s, with s of shape (out_channels, 1, 1).

    Eager PyTorch writes the convolution output, reads it twice in the norm (statistics, then
    normalisation) and once more for the scale. A fused implementation accumulates each group's
    sum and sum of squares in the convolution's epilogue and applies the normalisation, affine
    and scale (one per-channel multiply-add once the statistics are known) in a single pass.
    """

    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.2 * torch.randn(out_channels))
            self.norm.bias.copy_(0.2 * torch.randn(out_channels))
        self.scale = nn.Parameter(0.5 + torch.rand(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x)) * self.scale


# H200 eager 2.6 ms (measured): 39 GFLOP in fp32 without TF32 (0.38 ms with cuDNN's default TF32)
batch = 64
in_channels = 128
num_groups = 32
channels_per_group = 8
height = 32
width = 32
SCALABLE_SIZES = ("batch", "in_channels", "channels_per_group")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, num_groups * channels_per_group, num_groups]
