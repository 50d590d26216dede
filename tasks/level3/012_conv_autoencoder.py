import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A small fully convolutional autoencoder on 3-channel images (128x128 at full size).
    Encoder: three 4x4 stride-2 convolutions with ReLU (3 -> 32 -> 64 -> 128 channels, an eighth
    of the resolution), then a 1x1 convolution down to a 16-channel code. Decoder: a 1x1
    convolution back to 128 channels with ReLU, then three sub-pixel upsampling stages, each a
    3x3 convolution to 4x the output channels followed by a 2x pixel shuffle
    (128 -> 64 -> 32 -> 3 channels, ReLU after the first two), back to the input shape. Returns
    the reconstruction.

    Eager PyTorch runs each convolution, then bias and ReLU as separate passes, copies every
    pixel shuffle into a new tensor, and writes the narrow code to memory between two tiny-K 1x1
    convolutions. A fused version puts bias and ReLU in the convolution epilogues and stores
    straight to the shuffled positions, and chains conv3 -> code -> expansion per pixel tile
    without leaving the chip.
    """

    def __init__(self, in_channels: int, code_channels: int):
        super().__init__()
        self.enc = nn.ModuleList([
            nn.Conv2d(in_channels, 32, kernel_size=4, stride=2, padding=1),
            nn.Conv2d(32, 64, kernel_size=4, stride=2, padding=1),
            nn.Conv2d(64, 128, kernel_size=4, stride=2, padding=1),
        ])
        self.to_code = nn.Conv2d(128, code_channels, kernel_size=1)
        self.from_code = nn.Conv2d(code_channels, 128, kernel_size=1)
        self.dec = nn.ModuleList([
            nn.Conv2d(128, 4 * 64, kernel_size=3, padding=1),
            nn.Conv2d(64, 4 * 32, kernel_size=3, padding=1),
            nn.Conv2d(32, 4 * in_channels, kernel_size=3, padding=1),
        ])
        with torch.no_grad():
            # He initialisation keeps activations of order one through the ReLUs.
            for conv in list(self.enc) + [self.from_code] + list(self.dec):
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            nn.init.normal_(self.to_code.weight, 0.0, (1.0 / 128) ** 0.5)
            for layer in list(self.enc) + [self.to_code, self.from_code] + list(self.dec):
                layer.bias.uniform_(-0.1, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.enc:
            x = F.relu(conv(x))
        code = self.to_code(x)
        x = F.relu(self.from_code(code))
        x = F.relu(F.pixel_shuffle(self.dec[0](x), 2))
        x = F.relu(F.pixel_shuffle(self.dec[1](x), 2))
        return F.pixel_shuffle(self.dec[2](x), 2)


# H200 eager ~2.5 ms: 61 GFLOP of fp32 convolution (~2 ms) plus ~0.8 GB of activation traffic.
# Images are 8 * code_size pixels on a side (three stride-2 stages), so every code_size from 1
# up is valid.
batch = 128
in_channels = 3
code_size = 16
code_channels = 16
SCALABLE_SIZES = ("batch", "code_size")


def get_inputs():
    return [torch.randn(batch, in_channels, 8 * code_size, 8 * code_size)]


def get_init_inputs():
    return [in_channels, code_channels]
