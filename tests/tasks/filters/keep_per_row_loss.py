import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error per row, rows at different scales: a loss whose value depends on the
    draw (near miss of output_constant and insensitive_to_input)."""

    def forward(self, prediction, target):
        return ((prediction - target) ** 2).mean(dim=-1)


def get_inputs():
    scale = torch.rand(256, 1) * 4 + 0.1
    return [torch.randn(256, 512) * scale, torch.randn(256, 512) * scale]


def get_init_inputs():
    return []
