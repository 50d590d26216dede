import torch
import torch.nn as nn


class Model(nn.Module):
    """A softmax over rows of 16 (4M rows, 256 MiB read and written): a gate over 16 experts for
    each of many tokens."""

    def forward(self, x):
        return torch.softmax(x * 0.5, dim=-1)


rows = 4194304
SCALABLE_SIZES = ("rows",)


def get_inputs():
    return [torch.randn(rows, 16)]


def get_init_inputs():
    return []
