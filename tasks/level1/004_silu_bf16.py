import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU (swish) in bfloat16: y = x * sigmoid(x), input and output in bf16.

    Memory-bound: one read and one write of 2^30 bf16 values. The sigmoid is evaluated in fp32
    registers and rounded once; a kernel wins by moving 16 bytes per load/store (8 bf16 values)
    at full HBM bandwidth.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


# H200 eager ~1.2 ms (measured 1.15 ms): one pass reading 2 GiB and writing 2 GiB (2^30 bf16 elements)
rows = 32768
cols = 32768
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.bfloat16).mul_(3.0)]


def get_init_inputs():
    return []
