import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a (seq, hidden) table to every sequence of a batch by broadcasting: y = x + table.

    Like adding positional embeddings given as an input. Memory-bound: x is read once and y
    written once; the 32 MiB table should come from L2 for every batch entry rather than from
    HBM. A kernel wins by streaming x at full bandwidth with the table's index computed cheaply.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return x + table


# H200 eager ~1.2 ms (measured 1.93 ms): reads 2 GiB of x (+32 MiB table), writes 2 GiB (2^29 fp32 outputs)
batch = 64
seq_len = 2048
hidden = 4096
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, seq_len, hidden), torch.randn(seq_len, hidden)]


def get_init_inputs():
    return []
