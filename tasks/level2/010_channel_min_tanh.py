import torch
import torch.nn as nn


class Model(nn.Module):
    """A per-channel bias, a minimum over the channel dimension and a scaled tanh:
    y[n, h, w] = tanh(scale * min_c (x[n, c, h, w] + bias[c])) for an NCHW input.

    Eager PyTorch writes the biased tensor in full, then reduces it over channels (also writing
    the argmin indices, which are discarded), then runs the scale and the tanh on the result. A
    fused kernel reads each pixel's channels once, takes the minimum in registers and writes one
    activated value per pixel: one pass over the input instead of three.
    """

    def __init__(self, channels: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(channels, 1, 1))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.min(x + self.bias, dim=1).values
        return torch.tanh(m * self.scale)


# H200 eager ~1.9 ms: bias add (2 passes over 2 GiB fp32), channel min (1), small tanh and scale
batch = 512
channels = 16
height = 256
width = 256
SCALABLE_SIZES = ("batch", "height")


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, 0.5]
