import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product y = A @ x, with A of shape (m, k) and x of length k.

    Two FLOPs per matrix element read, so the time is one pass over A: a kernel wins by reading
    A with wide coalesced loads (a warp or block per row, x held in shared memory or cache) and
    reducing each row's dot product in registers, reaching HBM bandwidth.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, x)


# H200 eager 0.76 ms (measured): one read of a 3.2 GB matrix
m = 49152
k = 16384
SCALABLE_SIZES = ("m", "k")


def get_inputs():
    return [torch.randn(m, k), torch.randn(k)]


def get_init_inputs():
    return []
