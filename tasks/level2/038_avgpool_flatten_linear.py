import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A classifier head on a feature map: 4x4 average pooling with stride 4 of a (batch,
    channels, 16, 16) map down to 4x4, flattened, then a linear layer with bias to out_features.

    Eager PyTorch writes the pooled map and reads it back as the GEMM's input. Pooling is linear,
    so a kernel can average the 16 pixels of each window while loading the GEMM's A tiles from
    the unpooled map, skipping the intermediate tensor and its launch.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = F.avg_pool2d(x, kernel_size=4, stride=4)
        return self.linear(pooled.flatten(1))


# H200 eager 1.5 ms (measured): reads a 512 MiB map, then 69 GFLOP in fp32 (no TF32)
batch = 1024
channels = 512
height = 16
width = 16
out_features = 4096
SCALABLE_SIZES = ("batch", "channels", "out_features")


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels * (height // 4) * (width // 4), out_features]
