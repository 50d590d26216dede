import torch
import torch.nn as nn
import torch.nn.functional as F


def _eval_batch_norm(channels: int) -> nn.BatchNorm2d:
    """A BatchNorm2d in eval mode with non-trivial affine parameters and running statistics."""
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.weight.copy_(1.0 + 0.2 * torch.randn(channels))
        bn.bias.copy_(0.2 * torch.randn(channels))
        bn.running_mean.copy_(0.2 * torch.randn(channels))
        bn.running_var.copy_(0.5 + torch.rand(channels))
    return bn.eval()


class Model(nn.Module):
    """The first bottleneck block of a ResNet-50 stage, in inference mode: 1x1 convolution
    256 -> 128, 3x3 convolution 128 -> 128 with stride 2, 1x1 convolution 128 -> 512, each with
    a batch norm (running statistics) and ReLU after the first two; the shortcut is a strided 1x1
    projection 256 -> 512 with its own batch norm; y = relu(main + shortcut), 56x56 -> 28x28.

    Eager PyTorch runs four convolutions, four batch norms, two ReLUs, the add and the final
    ReLU as separate kernels. Folding the batch norms into the convolutions, putting bias and
    ReLU into their epilogues, and fusing the projection shortcut with the last 1x1 convolution
    (two GEMMs accumulating into one output tile, then add and ReLU) removes most of the
    activation traffic.
    """

    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size=1, bias=False)
        self.bn1 = _eval_batch_norm(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, kernel_size=3, stride=stride,
                               padding=1, bias=False)
        self.bn2 = _eval_batch_norm(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, kernel_size=1, bias=False)
        self.bn3 = _eval_batch_norm(out_channels)
        self.proj = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False)
        self.bn_proj = _eval_batch_norm(out_channels)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.bn_proj(self.proj(x)))


# H200 eager 1.8 ms (measured): 47.6 GFLOP of fp32 convolution plus ~2 GB of activation traffic
batch = 64
in_channels = 256
mid_channels = 128
out_channels = 512
height = 56
width = 56
SCALABLE_SIZES = ("batch", "height", "width")


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, 2]
