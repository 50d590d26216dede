import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A 3x3 convolution with bias (stride 1, padding 1) followed by hard-swish,
    x * relu6(x + 3) / 6, as in MobileNetV3's stems, on 128x128 maps.

    Eager PyTorch writes the convolution output and then reads and writes it again for the
    activation; an implicit-GEMM convolution applies the bias and hard-swish in its epilogue.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.conv(x))


# H200 eager 1.1 ms (measured): 39 GFLOP in fp32 without TF32 (0.44 ms with cuDNN's default TF32)
batch = 16
in_channels = 64
out_channels = 128
height = 128
width = 128
SCALABLE_SIZES = ("batch", "in_channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
