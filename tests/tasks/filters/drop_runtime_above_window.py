import torch
import torch.nn as nn
import time


class Model(nn.Module):
    """Waits 60 ms in every call: far outside a window that ends at 40 ms."""

    def forward(self, x):
        time.sleep(0.06)
        return x * 2 + 1


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
