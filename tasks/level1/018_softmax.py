import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax of attention scores over the key dimension (256 keys): y = softmax(x, dim=-1).

    Scores have standard deviation 2, so a few percent of each row's probabilities exceed 0.01
    and the output is not near zero. Eager runs one fused kernel; a better one reads each
    256-value row into registers of a single warp, does the max and sum with shuffles, and
    writes once, at full bandwidth.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


# H200 eager ~1.2 ms (measured 1.03 ms): reads 2 GiB, writes 2 GiB (2^29 fp32 elements)
batch = 512
heads = 16
q_len = 256
k_len = 256
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, heads, q_len, k_len).mul_(2.0)]


def get_init_inputs():
    return []
