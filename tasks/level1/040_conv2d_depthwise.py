import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise 3x3 convolution (groups = channels, one 3x3 filter per channel), stride 1,
    padding 1, with bias, as in MobileNet blocks: 384 channels on 112x112 maps.

    Nine multiply-adds per output, so it is memory bound: a kernel that loads a tile of one
    channel plane with its one-pixel halo into shared memory and keeps the nine weights in
    registers reads the input once and writes the output once.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, stride=1, padding=1,
                              groups=channels)
        nn.init.normal_(self.conv.bias, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# H200 eager 4.3 ms (measured): reads 1.85 GB, writes 1.85 GB
batch = 96
channels = 384
height = 112
width = 112
SCALABLE_SIZES = ("batch", "channels")


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels]
