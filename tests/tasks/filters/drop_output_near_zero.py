import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over 8192 classes: every probability is far below the tolerance."""

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(16, 8192)]


def get_init_inputs():
    return []
