import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A ResNet-style conv-BN-ReLU unit at inference: a 3x3 convolution (stride 1, padding 1, no
    bias), batch norm with its running statistics (eval mode, whatever the module's mode), then
    ReLU.

    At inference the batch norm is a per-channel affine map, so it folds into the convolution's
    weights and bias; the ReLU then fits in the convolution's epilogue. Eager PyTorch instead
    writes the convolution output and passes over it twice more.
    """

    def __init__(self, in_channels: int, out_channels: int, eps: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bn_weight = nn.Parameter(1.0 + 0.2 * torch.randn(out_channels))
        self.bn_bias = nn.Parameter(0.2 * torch.randn(out_channels))
        self.register_buffer("running_mean", 0.2 * torch.randn(out_channels))
        self.register_buffer("running_var", 0.5 + torch.rand(out_channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = F.batch_norm(y, self.running_mean, self.running_var, self.bn_weight, self.bn_bias,
                         training=False, eps=self.eps)
        return torch.relu(y)


# H200 eager 1.5 ms (measured): 59 GFLOP in fp32 without TF32 (0.44 ms with cuDNN's default TF32)
batch = 64
in_channels = 128
out_channels = 128
height = 56
width = 56
SCALABLE_SIZES = ("batch", "in_channels", "out_channels")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, 1e-5]
