import torch
import torch.nn as nn


class Model(nn.Module):
    """Holds a linear layer it never uses."""

    def __init__(self, features: int):
        super().__init__()
        self.unused = nn.Linear(features, features)

    def forward(self, x):
        return torch.sigmoid(x) * 4


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]
