import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Softplus with beta and threshold: y = log(1 + exp(beta * x)) / beta, or x where beta * x > threshold.

    beta = 2 and threshold = 10 with inputs of standard deviation 3 put about 5% of the elements
    on the linear branch. Memory-bound: one read and one write; a kernel wins by streaming at
    full bandwidth with a stable log1p(exp(.)) evaluation.
    """

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


# H200 eager ~1.2 ms (measured 1.13 ms): one pass reading 2 GiB and writing 2 GiB (2^29 fp32 elements)
rows = 65536
cols = 8192
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, cols).mul_(3.0)]


def get_init_inputs():
    return [2.0, 10.0]
