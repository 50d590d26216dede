import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A fully connected layer, y = x @ W^T + b, with x of shape (batch, in_features), W of
    shape (out_features, in_features) and a bias per output feature.

    The GEMM dominates; a kernel adds the bias in its epilogue while the output tile is still
    in registers rather than in a second pass over y, and reads W along its contiguous
    (in_features) dimension.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


# H200 eager 2.7 ms (measured): 137 GFLOP in fp32 (no TF32)
batch = 8192
in_features = 2048
out_features = 4096
SCALABLE_SIZES = ("batch", "in_features", "out_features")


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
