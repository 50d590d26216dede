import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A style-transfer / GAN block: a 3x3 convolution with bias (padding 1), instance norm over
    each (sample, channel) map with a learned affine, and leaky ReLU with slope 0.2.

    Eager PyTorch writes the convolution output, reads it twice in the norm and passes over the
    result again for the activation. A fused implementation accumulates each map's sum and sum of
    squares in the convolution's epilogue, then normalises and activates in one pass (or, with a
    block owning a whole 128x128 map, before the first store).
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.norm = nn.InstanceNorm2d(out_channels, affine=True)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.2 * torch.randn(out_channels))
            self.norm.bias.copy_(0.2 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.norm(self.conv(x)), negative_slope=0.2)


# H200 eager 1.2 ms (measured): 39 GFLOP in fp32 without TF32 (0.61 ms with cuDNN's default TF32)
batch = 32
in_channels = 64
out_channels = 64
height = 128
width = 128
SCALABLE_SIZES = ("batch", "in_channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
