import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer norm with its default weights (all ones, zero bias): the same for every seed, yet
    every weight matters (near miss of insensitive_to_weights)."""

    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(128, 64) * 3 + 1]


def get_init_inputs():
    return [64]
