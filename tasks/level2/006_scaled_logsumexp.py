import torch
import torch.nn as nn


class Model(nn.Module):
    """A log-partition function of scaled, shifted logits: y[r] = logsumexp(x[r] * scale + bias)
    over the last dimension, with a fixed scale and a learned per-column bias.

    Eager PyTorch materialises x * scale and then + bias as two full temporaries before
    logsumexp, which itself runs a max pass, a subtract, an exp and a sum. A fused kernel reads
    each row once and computes an online (running max, rescaled sum) logsumexp of the
    transformed values, writing one value per row: one pass over memory instead of about ten.
    """

    def __init__(self, cols: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(cols))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x * self.scale + self.bias, dim=-1)


# H200 eager ~3.0 ms: mul (2 passes), add (2), logsumexp (~6) over 1 GiB fp32 (rows x 1024)
rows = 262144
cols = 1024
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols) + 2.0 * torch.randn(rows, 1)]


def get_init_inputs():
    return [cols, 1.5]
