import torch
import torch.nn as nn


class Model(nn.Module):
    """A gated product of two inputs, each of which matters (near miss of
    insensitive_to_input)."""

    def forward(self, x, gate):
        return x * torch.sigmoid(gate)


def get_inputs():
    return [torch.randn(128, 128), torch.randn(128, 128)]


def get_init_inputs():
    return []
