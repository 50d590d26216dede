import torch
import torch.nn as nn


class Model(nn.Module):
    """Log-softmax of language-model logits over a 32768-word vocabulary: y = log_softmax(x, dim=-1).

    Log-probabilities stay around -10 with a spread of a few units, so long rows are not
    degenerate here. A row is 128 KiB: a kernel wins by reading it once (holding it in shared
    memory or registers across a block, or with an online max/sum) and writing once.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


# H200 eager ~1.2-1.8 ms (measured 1.73 ms): reads 2 GiB once or twice, writes 2 GiB (2^29 fp32 elements)
rows = 16384
vocab = 32768
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, vocab).mul_(2.0)]


def get_init_inputs():
    return []
