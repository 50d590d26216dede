import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Hard-swish in float16 on an NCHW feature map: y = x * clamp(x + 3, 0, 6) / 6.

    Inputs span all three pieces (x <= -3 gives 0, x >= 3 gives x, the quadratic in between).
    Memory-bound: one read and one write of 2^30 fp16 values; a kernel wins by 16-byte loads and
    stores at full HBM bandwidth.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(x)


# H200 eager ~1.2 ms (measured 1.13 ms): one pass reading 2 GiB and writing 2 GiB (2^30 fp16 elements)
batch = 128
channels = 128
height = 256
width = 256
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, channels, height, width, dtype=torch.float16).mul_(3.0)]


def get_init_inputs():
    return []
