import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies matrices whose inner sizes differ: raises in eager."""

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(64, 32), torch.randn(16, 64)]


def get_init_inputs():
    return []
