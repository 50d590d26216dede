import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention in bfloat16 with an additive bias per key position (broadcast over the batch
    and the queries) and a head dim of 32, the batch in one dim: softmax(Q K^T * 0.05 + bias) V.
    A low scale: a bfloat16 score is 1/128 of itself apart from the next, and verify's spiked
    set (one element 50 times the largest) makes scores that large."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 1, 512).to(torch.bfloat16))

    def forward(self, q, k, v):
        scores = torch.bmm(q, k.transpose(1, 2)) * 0.05 + self.bias[0]
        return torch.bmm(torch.softmax(scores, dim=-1), v)


batch = 512
SCALABLE_SIZES = ("batch",)


def get_inputs():
    return [torch.randn(batch, 512, 32).to(torch.bfloat16),
            torch.randn(batch, 512, 32).to(torch.bfloat16),
            torch.randn(batch, 512, 32).to(torch.bfloat16)]


def get_init_inputs():
    return []
