import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """One U-Net level on an NCHW feature map, down then up with a skip concatenation:
    e = relu(conv3x3(x)) at full resolution (C channels); m = two conv3x3 + ReLU at half
    resolution on maxpool2(e) (2C channels); u = the 2x up-projection of m back to C channels,
    written as a 1x1 convolution to 4C channels and a pixel shuffle (a 2x2 stride-2 transposed
    convolution without the scatter); y = conv3x3(relu(conv3x3(cat(e, u)))). C = 64 on 128x128
    maps.

    Eager PyTorch writes every convolution's output, then applies bias and ReLU in separate
    passes, pools in another, rearranges the up-projection with a pixel-shuffle copy and copies
    both halves into a new tensor for the concatenation. A fused version puts bias and ReLU into
    the convolution epilogues, pools while storing e, and reads the skip and the upsampled map
    directly as the two halves of the decoder convolution's input channels (the shuffle is only
    an index map), so the concatenated tensor never exists.
    """

    def __init__(self, channels: int):
        super().__init__()
        c = channels
        self.enc = nn.Conv2d(c, c, kernel_size=3, padding=1)
        self.mid1 = nn.Conv2d(c, 2 * c, kernel_size=3, padding=1)
        self.mid2 = nn.Conv2d(2 * c, 2 * c, kernel_size=3, padding=1)
        self.up = nn.Conv2d(2 * c, 4 * c, kernel_size=1)
        self.dec1 = nn.Conv2d(2 * c, c, kernel_size=3, padding=1)
        self.dec2 = nn.Conv2d(c, c, kernel_size=3, padding=1)
        with torch.no_grad():
            # He initialisation keeps activations of order one through the ReLUs.
            for layer in (self.enc, self.mid1, self.mid2, self.dec1, self.dec2):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                layer.bias.uniform_(-0.1, 0.1)
            self.up.weight.normal_(0.0, (1.0 / (2 * c)) ** 0.5)
            self.up.bias.uniform_(-0.1, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = F.relu(self.enc(x))
        m = F.relu(self.mid1(F.max_pool2d(e, 2)))
        m = F.relu(self.mid2(m))
        u = F.pixel_shuffle(self.up(m), 2)
        d = F.relu(self.dec1(torch.cat((e, u), dim=1)))
        return self.dec2(d)


# H200 eager ~2 ms: 55 GFLOP of fp32 convolution (~1.8 ms) plus ~0.5 GB of activation traffic.
# The map is 2 * pooled_size on each side, so every pooled_size from 1 up is valid.
batch = 8
channels = 64
pooled_size = 64
SCALABLE_SIZES = ("batch", "pooled_size")


def get_inputs():
    return [torch.randn(batch, channels, 2 * pooled_size, 2 * pooled_size)]


def get_init_inputs():
    return [channels]
