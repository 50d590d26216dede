import torch
import torch.nn as nn


class Model(nn.Module):
    """A maxout over pieces of 4 (8M rows of 4 floats, 128 MiB read), then a tanh: rows so short
    that a warp a row leaves 31 of its lanes idle."""

    def forward(self, x):
        return torch.tanh(x.max(dim=-1).values)


rows = 8388608
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, 4)]


def get_init_inputs():
    return []
