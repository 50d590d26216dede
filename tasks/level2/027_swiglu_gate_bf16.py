import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """The gated half of a SwiGLU feed-forward layer in bf16: silu(x @ W_gate^T) * (x @ W_up^T),
    two bias-free projections from d_model to hidden and a SiLU-gated product.

    Eager PyTorch runs two GEMMs and writes both (tokens, hidden) results, then a SiLU pass and a
    multiply pass. A fused kernel computes the gate and up tiles of the same output block
    together (one GEMM against the interleaved weights, sharing the loads of x) and applies the
    SiLU and product in the epilogue, writing only the gated result.
    """

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate(x)) * self.up(x)


# H200 eager 2.1 ms (measured): 1.48 TFLOP on bf16 tensor cores, plus ~1 GB for SiLU and multiply
tokens = 8192
d_model = 4096
hidden = 11008
SCALABLE_SIZES = ("tokens", "d_model", "hidden")


def get_inputs():
    return [torch.randn(tokens, d_model, dtype=torch.bfloat16)]


def get_init_inputs():
    return [d_model, hidden]
