import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A per-feature affine transform and SiLU, y = silu(x * weight + bias), alongside a
    diagnostic that is computed and thrown away: the row norms of the pre-activation.

    Eager PyTorch runs every line, including the norm reduction whose result is never returned,
    and writes two (rows, features) temporaries for the multiply and the add. A fused kernel
    drops the dead reduction and computes the affine transform and the SiLU in one pass, reading
    x once and writing y once: two passes over memory instead of seven.
    """

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(features))
        self.bias = nn.Parameter(0.5 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.weight + self.bias
        row_norms = torch.linalg.vector_norm(h, dim=-1)  # diagnostic only, not returned
        del row_norms
        return F.silu(h)


# H200 eager ~2.2 ms: mul (2 passes), add (2), unused norm (1), silu (2) over 1 GiB fp32
rows = 32768
features = 8192
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
