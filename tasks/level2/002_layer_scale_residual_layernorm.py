import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A residual connection with a learned layer scale, followed by a layer norm:
    y = LayerNorm(x + gamma * branch) over the last dimension, with learned per-feature gamma,
    norm weight and norm bias.

    Eager PyTorch runs the multiply by gamma and the residual add as two kernels, materialising
    two (rows, hidden) temporaries, before the layer norm reads the sum again. A fused kernel
    reads x and branch once per row, forms the sum in registers, reduces mean and variance and
    writes the normalised row: three passes over memory instead of seven.
    """

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.gamma = nn.Parameter(0.5 + 0.25 * torch.randn(hidden))
        self.norm_weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.norm_bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        h = x + self.gamma * branch
        return F.layer_norm(h, (h.shape[-1],), self.norm_weight, self.norm_bias, self.eps)


# H200 eager ~2.1 ms: mul (2 passes), add (3), layer norm (2) over 1 GiB fp32 tensors, 7 GiB moved
rows = 65536
hidden = 4096
SCALABLE_SIZES = ("rows",)


def get_inputs():
    x = torch.randn(rows, hidden) + torch.randn(rows, 1)
    branch = torch.randn(rows, hidden) * (0.5 + 1.5 * torch.rand(rows, 1))
    return [x, branch]


def get_init_inputs():
    return [hidden, 1e-5]
