import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Inference-mode batch norm, ReLU and a residual add, the tail of a ResNet basic block:
    y = relu(BatchNorm_eval(x)) + residual, using stored running statistics.

    Eager PyTorch runs the batch norm, the ReLU and the add as three kernels, writing two
    (N, C, H, W) temporaries. A fused kernel folds the running statistics and affine parameters
    into one per-channel scale and shift, and reads x and the residual once to write y once:
    three passes over memory instead of seven.
    """

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.3 * torch.randn(channels))
        self.bias = nn.Parameter(0.3 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                         training=False, eps=self.eps)
        return torch.relu(h) + residual


# H200 eager ~2.2 ms: batch norm (2 passes), relu (2), add (3) over 1 GiB fp32 (128 x 128 x 128 x 128)
batch = 128
channels = 128
height = 128
width = 128
SCALABLE_SIZES = ("batch", "height")


def get_inputs():
    return [torch.randn(batch, channels, height, width), torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, 1e-5]
