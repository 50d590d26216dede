import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer whose outputs are measured from their row's minimum and squashed:
    y = tanh(scale * (z - min(z, dim=1))) with z = x @ W^T + b, so every row's smallest feature
    maps to 0 and the others to (0, 1).

    Eager PyTorch writes z, reads it for the row minimum, then runs subtract, multiply and tanh as
    three more passes. A kernel whose thread blocks own whole rows of the output keeps the GEMM
    tile in registers, finds the row minimum with a block reduction and writes y once.
    """

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        zmin = z.min(dim=1, keepdim=True).values
        return torch.tanh((z - zmin) * self.scale)


# H200 eager 3.0 ms (measured): 137 GFLOP in fp32 (no TF32), plus 4 passes over the 128 MiB output
batch = 8192
in_features = 2048
out_features = 4096
SCALABLE_SIZES = ("batch", "in_features", "out_features")


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features, 0.5]
