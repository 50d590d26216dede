import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A MobileNet depthwise-separable convolution: a 3x3 depthwise convolution (one filter per
    channel, padding 1, with bias), a 1x1 pointwise convolution to out_channels (with bias), and
    ReLU6.

    Eager PyTorch writes the depthwise output and reads it back for the pointwise GEMM, then
    passes over the larger pointwise output for the ReLU6. A fused kernel computes the depthwise
    tile on the fly as the pointwise GEMM's input operand (it is cheap and memory bound) and
    clamps in the epilogue, so only x is read and only y is written.
    """

    def __init__(self, channels: int, out_channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)
        self.pointwise = nn.Conv2d(channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu6(self.pointwise(self.depthwise(x)))


# H200 eager 2.3 ms (measured): 53 GFLOP in fp32 without TF32 for the pointwise convolution, ~1.2 GB
# moved by the depthwise convolution and the ReLU6 (1.2 ms with cuDNN's default TF32)
batch = 64
channels = 256
out_channels = 512
height = 56
width = 56
SCALABLE_SIZES = ("batch", "channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, out_channels]
