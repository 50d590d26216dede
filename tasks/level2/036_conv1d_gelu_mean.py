import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A 1-D convolution over a sequence (kernel 3, padding 1, with bias), GELU, then the mean
    over the length: one feature vector per sample, y[b, c] = mean_t gelu(conv1d(x)[b, c, t]).
    The input carries a per-(sample, channel) offset, so the pooled features depend on the sample.

    Eager PyTorch writes the (batch, out_channels, length) convolution output, passes over it for
    the GELU and reads it again for the mean. A kernel applies the GELU in the convolution's
    epilogue and reduces each output tile along the length there, never storing the full map.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x)).mean(dim=2)


# H200 eager 1.5 ms (measured): 52 GFLOP in fp32 without TF32 (0.56 ms with cuDNN's default TF32)
batch = 64
in_channels = 256
out_channels = 256
length = 2048
SCALABLE_SIZES = ("batch", "in_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, length) + torch.randn(batch, in_channels, 1)]


def get_init_inputs():
    return [in_channels, out_channels]
