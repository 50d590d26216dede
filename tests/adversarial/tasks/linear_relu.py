import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ W^T + b): a GEMM (which a candidate may leave to torch.mm) and an epilogue (which
    it writes itself). An fp32 task, to be computed at fp32 precision (S11)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return [512, 512]
