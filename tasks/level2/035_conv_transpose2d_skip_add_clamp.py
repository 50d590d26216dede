import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A U-Net decoder step: a 2x2 transposed convolution with stride 2 (doubling height and
    width, with bias), plus a skip connection of the output's shape, clamped to [-1.5, 1.5]:
    y = clamp(conv_transpose2d(x) + skip, -1.5, 1.5).

    Eager PyTorch writes the upsampled map, then reads it with the skip tensor for the add and
    passes over the sum again for the clamp. A kernel loads the skip tile in the transposed
    convolution's epilogue and clamps before the only store of the output.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        # Scaled so the upsampled map has unit variance: each output pixel sums in_channels taps.
        self.weight = nn.Parameter(torch.randn(in_channels, out_channels, 2, 2)
                                   / in_channels ** 0.5)
        self.bias = nn.Parameter(0.2 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        # Non-overlapping 2x2 windows: on the H200, cuDNN's transposed convolution with an
        # overlapping 4x4 kernel gave run-to-run different results; this one is deterministic.
        up = F.conv_transpose2d(x, self.weight, self.bias, stride=2)
        return torch.clamp(up + skip, -1.5, 1.5)


# H200 eager 1.6 ms (measured): 34 GFLOP in fp32 without TF32 (0.95 ms with cuDNN's default TF32),
# plus ~1.3 GB moved by the add and the clamp
batch = 128
in_channels = 256
out_channels = 128
height = 32
width = 32
SCALABLE_SIZES = ("batch", "in_channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width),
            torch.randn(batch, out_channels, 2 * height, 2 * width)]


def get_init_inputs():
    return [in_channels, out_channels]
