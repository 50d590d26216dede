import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ELU on an NCHW feature map with odd spatial sizes: y = x if x > 0 else alpha * (exp(x) - 1).

    Memory-bound: one read and one write. With 240x240 planes and 96 channels the total is not a
    power of two; a kernel wins by streaming at full bandwidth and handling the tail.
    """

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


# H200 eager ~1.2 ms (measured 1.12 ms): one pass reading 2 GiB and writing 2 GiB (531M fp32 elements)
batch = 96
channels = 96
height = 240
width = 240
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, channels, height, width).mul_(2.0)]


def get_init_inputs():
    return [1.5]
