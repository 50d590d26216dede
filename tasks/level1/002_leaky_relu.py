import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Leaky ReLU on a feature map: y = x where x > 0, else negative_slope * x.

    The slope (0.2) is large enough that the negative branch is well above the tolerance, so a
    plain ReLU does not pass. Memory-bound: one read and one write of the NCHW tensor; a kernel
    can only win by streaming at full HBM bandwidth.
    """

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self.negative_slope)


# H200 eager ~1.2 ms (measured 1.13 ms): one pass reading 2 GiB and writing 2 GiB (2^29 fp32 elements)
batch = 64
channels = 128
height = 256
width = 256
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [0.2]
