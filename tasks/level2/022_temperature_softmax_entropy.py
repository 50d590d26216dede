import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """The entropy of a temperature-scaled softmax, per row: with z = x / T,
    y[r] = -sum_j softmax(z[r])[j] * log_softmax(z[r])[j].

    Eager PyTorch writes z, the softmax, the log-softmax and their product in full before
    reducing, each kernel reading its inputs back from memory. A fused kernel reads a row once,
    computes the max, the sum of exponentials and the sum of exp(z) * z in one (online) pass,
    and writes one value per row: H = log(sum e^z) - sum(e^z * z) / sum(e^z) after the max shift.
    """

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x / self.temperature
        return -(F.softmax(z, dim=-1) * F.log_softmax(z, dim=-1)).sum(dim=-1)


# H200 eager ~3.1 ms: div (2 passes), softmax (2), log_softmax (2), mul (3), sum (1) over 1 GiB fp32
rows = 262144
cols = 1024
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols) * (0.5 + 4.0 * torch.rand(rows, 1))]


def get_init_inputs():
    return [0.7]
