import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Smooth L1 (Huber) loss per sample: elementwise 0.5 d^2 / beta where |d| < beta and
    |d| - 0.5 beta elsewhere, for d = prediction - target, averaged over the 1024 features of
    each row.

    Eager writes the elementwise loss tensor and reads it back for the row mean; a fused kernel
    reads both inputs once, reduces each row in registers and writes one float per row.
    """

    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.smooth_l1_loss(prediction, target, reduction="none", beta=self.beta)
        return loss.mean(dim=1)


# H200 eager 1.0 ms (measured): reads 2.1 GB and writes 1.1 GB, then reads 1.1 GB back
rows = 262144
features = 1024
SCALABLE_SIZES = ("rows",)


def get_inputs():
    # Per-row scales and offsets, so that rows fall in the quadratic or the linear regime and
    # the per-row losses spread.
    prediction = torch.randn(rows, features) * (torch.rand(rows, 1) * 2.9 + 0.1)
    target = torch.randn(rows, features) * (torch.rand(rows, 1) * 2.9 + 0.1) + torch.randn(rows, 1)
    return [prediction, target]


def get_init_inputs():
    return [1.0]
