import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Layer norm followed by the tanh-approximated GELU, in bf16: y = gelu(LayerNorm(x)), with
    learned per-feature weight and bias, the norm over the last dimension.

    Eager PyTorch writes the normalised bf16 tensor and the GELU reads it back. A fused kernel
    applies the GELU to each normalised element before storing it, reducing the row statistics
    in fp32: two passes over memory instead of four.
    """

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.3 * torch.randn(hidden))
        self.bias = nn.Parameter(0.3 * torch.randn(hidden))
        self.eps = eps
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
        return F.gelu(h, approximate="tanh")


# H200 eager ~1.3 ms: layer norm (2 passes) and gelu (2) over 1 GiB bf16 (131072 x 4096)
tokens = 131072
hidden = 4096
SCALABLE_SIZES = ("tokens", "hidden")


def get_inputs():
    x = torch.randn(tokens, hidden) * (0.5 + 2.0 * torch.rand(tokens, 1)) + torch.randn(tokens, 1)
    return [x.to(torch.bfloat16)]


def get_init_inputs():
    return [hidden, 1e-5]
