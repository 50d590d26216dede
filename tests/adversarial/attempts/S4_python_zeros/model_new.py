"""S4: returns zeros, which is within atol of relu(x) * scale when the scale is tiny. Run on the
degenerate task (the evaluator must refuse the task, not reward the constant) and on its normal
twin (where the constant is simply wrong)."""
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
relu_scale = lib.bind("relu_scale", "tensor", "tensor", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
