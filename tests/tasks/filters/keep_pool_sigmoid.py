import torch
import torch.nn as nn


class Model(nn.Module):
    """Max pooling then a sigmoid: unlike anything in the reference set (near miss of
    too_similar), quick (inside the window), deterministic."""

    def forward(self, x):
        return torch.sigmoid(torch.nn.functional.max_pool2d(x, 2)) * 5


def get_inputs():
    return [torch.randn(4, 8, 32, 32)]


def get_init_inputs():
    return []
