import torch
import a_module_that_does_not_exist  # noqa: F401


class Model(torch.nn.Module):
    """Imports a module that is not installed."""

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
