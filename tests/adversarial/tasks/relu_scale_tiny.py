import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x) * 1e-5 over randn: every output is far below atol = 1e-2, so a constant zero
    would pass a plain tolerance check. A degenerate task (S4): the evaluator must refuse to
    reward anything on it."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return [1e-5]
