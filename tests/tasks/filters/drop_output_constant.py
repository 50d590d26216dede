import torch
import torch.nn as nn


class Model(nn.Module):
    """The mean of 65536 squares per row: about 1 for every row and every draw."""

    def forward(self, x):
        return (x * x).mean(dim=-1)


def get_inputs():
    return [torch.randn(32, 65536)]


def get_init_inputs():
    return []
