"""S14: keeps state across calls in the module: a running buffer (the previous input) that is
added, scaled, to every output. The first call on a fresh module is right; the calls after it
carry the previous call into their answer."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu_running = lib.bind("scale_bias_relu_running", "tensor", "tensor", "tensor",
                                   "tensor", "i64", "i64", "f32", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))
        self.running = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        if self.running is None or self.running.shape != x.shape:
            self.running = torch.zeros_like(x)
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias_relu_running(x, self.bias, self.running, y, rows, cols, self.scale, 0.5)
        return y
