import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax over the last dimension, then a scale: almost all the work is the softmax, so a
    kernel for the scale alone speeds up only a trivial part (B5)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1) * self.scale


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return [4.0]
