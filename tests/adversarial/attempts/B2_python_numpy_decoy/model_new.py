"""B2: a compiled kernel is bound and called, so the candidate looks like it uses one, but it
does nothing: the output is computed with numpy, through views of the tensors' memory."""
import numpy as np
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu = lib.bind("scale_bias_relu", "tensor", "tensor", "tensor", "i64", "i64", "f32",
                           "stream")


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)  # the decoy
        out = y.numpy()
        np.multiply(x.numpy(), self.scale, out=out)
        np.add(out, self.bias.detach().numpy(), out=out)
        np.maximum(out, 0.0, out=out)
        return y
