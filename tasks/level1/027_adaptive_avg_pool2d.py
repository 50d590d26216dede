import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Adaptive 2D average pooling of a 50x50 feature map down to 7x7. Since 50 is not a
    multiple of 7, the windows have 8 or 9 rows and columns and neighbouring windows overlap by
    one row or column.

    The output is tiny (49 values per plane), so the work is one read of the input: a kernel
    that gives each (image, channel) plane to a block, reads it once with coalesced loads and
    reduces the window sums from shared memory runs at memory bandwidth.
    """

    def __init__(self, output_size: int):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)


# H200 eager 1.7 ms (measured): reads 2.6 GB, output negligible
batch = 256
channels = 1024
height = 50
width = 50
SCALABLE_SIZES = ("batch", "channels")


def get_inputs():
    return [torch.randn(batch, channels, height, width) * 2.0]


def get_init_inputs():
    return [7]
