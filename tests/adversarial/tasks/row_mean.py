import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over the last dimension. Over randn inputs the true answer is close to 0, the
    distribution's mean (S5), and the inputs come from a seed a candidate may try to guess (S7)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-1)


def get_inputs():
    return [torch.randn(512, 4096)]


def get_init_inputs():
    return []
