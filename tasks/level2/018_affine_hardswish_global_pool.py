import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A per-channel affine transform (a folded inference batch norm), hardswish and global
    average pooling, as at the head of MobileNetV3: y[n, c] = mean_hw hardswish(x[n, c] * s[c] + t[c]).

    Eager PyTorch writes three full (N, C, H, W) tensors (multiply, add, hardswish) before the
    mean reads the last one back. A fused kernel reads each channel plane once, applies the
    affine transform and the activation in registers and reduces it to one value: one pass over
    memory instead of seven.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter((1.0 + 0.3 * torch.randn(channels)).view(channels, 1, 1))
        self.shift = nn.Parameter((0.5 * torch.randn(channels)).view(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(x * self.scale + self.shift)
        return h.mean(dim=(2, 3))


# H200 eager ~2.2 ms: mul (2 passes), add (2), hardswish (2), mean (1) over 1 GiB fp32 (128 x 512 x 64 x 64)
batch = 128
channels = 512
height = 64
width = 64
SCALABLE_SIZES = ("batch", "height")


def get_inputs():
    x = torch.randn(batch, channels, height, width) + torch.randn(batch, channels, 1, 1)
    return [x]


def get_init_inputs():
    return [channels]
