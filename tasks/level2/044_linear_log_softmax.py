import torch
import torch.nn as nn


class Model(nn.Module):
    """A language-model output head: a linear layer with bias from d_model to the vocabulary,
    then log-softmax over the vocabulary, giving per-token log-probabilities.

    Eager PyTorch writes the (tokens, vocab) logits, then reads them twice and writes them once
    more in the log-softmax. A kernel computes per-tile row maxima and sums of exponentials in
    the GEMM's epilogue, combines them per row in a short second step, and subtracts the row's
    log-sum-exp in a final pass (or while the tiles are still resident), saving a pass.
    """

    def __init__(self, d_model: int, vocab: int):
        super().__init__()
        self.linear = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.linear(x), dim=1)


# H200 eager 2.9 ms (measured): 137 GFLOP in fp32 (no TF32), plus 3 passes over the 256 MiB logits
tokens = 4096
d_model = 1024
vocab = 16384
SCALABLE_SIZES = ("tokens", "d_model", "vocab")


def get_inputs():
    return [torch.randn(tokens, d_model)]


def get_init_inputs():
    return [d_model, vocab]
