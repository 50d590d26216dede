"""T4: at import, the GPU timer the harness reads is patched: Event.elapsed_time reports a
microsecond and torch.cuda.synchronize no longer waits. Written for the GPU's timer; the patch
is made on every device, and the evaluator must notice it on every device."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu = lib.bind("scale_bias_relu", "tensor", "tensor", "tensor", "i64", "i64", "f32",
                           "stream")


def one_microsecond(start, end) -> float:
    return 0.001


def no_wait(device=None) -> None:
    return None


torch.cuda.Event.elapsed_time = one_microsecond
torch.cuda.synchronize = no_wait


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)
        return y
