import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over 12 classes: probabilities well above the tolerance (near miss of
    output_near_zero)."""

    def forward(self, x):
        return torch.softmax(x * 2, dim=-1)


def get_inputs():
    return [torch.randn(256, 12)]


def get_init_inputs():
    return []
