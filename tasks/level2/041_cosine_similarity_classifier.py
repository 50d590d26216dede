import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A cosine-similarity classifier head: logits = s * normalize(x) @ normalize(W)^T, with rows
    of x and of the class weights W scaled to unit L2 norm and a fixed temperature s = 16.

    Eager PyTorch writes normalised copies of x and W, runs the GEMM and passes over the logits
    for the scale. The row norms are cheap reductions; a kernel computes them first (or on the fly
    in the GEMM's main loop) and applies 1 / |x_i|, 1 / |w_j| and s in the epilogue to the
    unnormalised product, so no normalised copy is written.
    """

    def __init__(self, features: int, classes: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(classes, features))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = F.normalize(x, dim=1) @ F.normalize(self.weight, dim=1).t()
        return logits * self.scale


# H200 eager 3.0 ms (measured): 137 GFLOP in fp32 (no TF32), plus ~0.6 GB for norms and scale
batch = 8192
features = 1024
classes = 8192
SCALABLE_SIZES = ("batch", "features", "classes")


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features, classes, 16.0]
