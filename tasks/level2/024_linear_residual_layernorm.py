import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A post-norm transformer sublayer's output path: a projection, a residual add and a layer
    norm, y = LayerNorm(x @ W^T + b + residual) over the last dimension.

    Eager PyTorch materialises the projection, then the sum, then runs the norm: three round trips
    over the (rows, features) activation after the GEMM. A fused kernel adds the bias and residual
    in the GEMM epilogue and, when a block owns whole rows, normalises them before the single store.
    """

    def __init__(self, in_features: int, features: int, eps: float):
        super().__init__()
        self.proj = nn.Linear(in_features, features)
        self.norm_weight = nn.Parameter(1.0 + 0.2 * torch.randn(features))
        self.norm_bias = nn.Parameter(0.2 * torch.randn(features))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = self.proj(x) + residual
        return F.layer_norm(h, (h.shape[-1],), self.norm_weight, self.norm_bias, self.eps)


# H200 eager 2.9 ms (measured): 137 GFLOP in fp32 (no TF32), plus ~0.6 GB for the add and norm
rows = 16384
in_features = 2048
features = 2048
SCALABLE_SIZES = ("rows", "in_features", "features")


def get_inputs():
    return [torch.randn(rows, in_features), torch.randn(rows, features)]


def get_init_inputs():
    return [in_features, features, 1e-5]
