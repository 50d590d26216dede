import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Batch normalization in inference mode, using stored running statistics.

    y = (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c]. The running
    statistics are non-trivial (means of standard deviation 0.5, variances in [0.25, 2.25]), and
    the affine weights are random. Per-element this is a multiply-add with per-channel
    constants: a kernel wins by folding the four vectors into one scale and one shift per
    channel and streaming x at full bandwidth.
    """

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.25 + 2.0 * torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, training=False, eps=self.eps
        )


# H200 eager ~1.2 ms (measured 1.47 ms): reads 2 GiB, writes 2 GiB (2^29 fp32 elements)
batch = 64
channels = 512
height = 128
width = 128
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, 1e-5]
