import torch
import torch.nn as nn


class Model(nn.Module):
    """A small projection written as a reduction of a broadcast product, plus a bias:
    y[b, o] = sum_k x[b, k] * w[o, k] + bias[o], computed as (x[:, None, :] * w[None, :, :]).sum(-1).

    Eager PyTorch materialises the full (batch, out, in) product, 2 GiB at full size, and then
    reads it back to reduce it. A kernel that recognises the contraction computes it as a GEMM
    (or a tiled dot product) from x and w directly, never writing the three-dimensional
    temporary, and adds the bias in the epilogue.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x[:, None, :] * self.weight[None, :, :]).sum(dim=-1) + self.bias


# H200 eager ~1.3 ms: the broadcast multiply writes 2 GiB (8192 x 64 x 1024 fp32), the sum reads it
batch = 8192
in_features = 1024
out_features = 64
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
