import torch
import torch.nn as nn


class Model(nn.Module):
    """x + 1e-4 * y: the second input moves the output by far less than the tolerance, so
    passing x through would pass a plain check. A degenerate task (S13)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + 1e-4 * y


def get_inputs():
    return [torch.randn(512, 2048), torch.randn(512, 2048)]


def get_init_inputs():
    return []
