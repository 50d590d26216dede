import torch
import torch.nn as nn


class Model(nn.Module):
    """A squeeze-and-excitation style channel gate: the spatial mean of each channel, a linear map
    across channels with bias, a sigmoid, and the input rescaled per channel,
    y = x * sigmoid(W @ mean_hw(x) + b). The input carries a per-(sample, channel) offset, so
    the gates depend on the sample.

    Memory bound: eager PyTorch reads x for the mean and again for the product, writing y.
    The squeeze (a reduction) must finish before any output can be written, so the floor is two
    reads of x and one write; a kernel reaches it by doing the tiny gate GEMM and the sigmoid in
    the reduction's last block (or a small middle kernel) and the broadcast multiply in one pass.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.fc = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.fc(x.mean(dim=(2, 3))))
        return x * gate[:, :, None, None]


# H200 eager 1.6 ms (measured): reads a 1.5 GiB input twice and writes 1.5 GiB
batch = 512
channels = 256
height = 56
width = 56
SCALABLE_SIZES = ("batch", "channels")


def get_inputs():
    return [torch.randn(batch, channels, height, width) + torch.randn(batch, channels, 1, 1)]


def get_init_inputs():
    return [channels]
