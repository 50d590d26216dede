import torch
import torch.nn as nn
import time


class Model(nn.Module):
    """Waits 300 ms in every call: twice the end of a window that ends at 150 ms, where the near
    misses, which take well under a millisecond alone, stay inside it on a loaded machine."""

    def forward(self, x):
        time.sleep(0.3)
        return x * 2 + 1


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
