import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A pre-norm transformer encoder block on (batch, seq_len, d_model) tokens, attention written
    out by hand: h = x + Wo(softmax(Q K^T / sqrt(d_head)) V) with Q, K, V = Wq, Wk, Wv applied
    to LayerNorm(x), split into heads; then y = h + fc2(gelu(fc1(LayerNorm(h)))).

    Eager PyTorch materialises the (batch, heads, seq, seq) score matrix, scales it, writes the
    softmax and reads it back for the second batched matmul, and runs every norm, bias, GELU and
    residual add as its own pass. A flash-attention kernel keeps scores on chip with an online
    softmax; Q, K, V come from one concatenated GEMM; GELU and the residual adds fold into GEMM
    epilogues and each layer norm is one pass.
    """

    def __init__(self, d_model: int, n_heads: int, d_hidden: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        with torch.no_grad():
            # Query and key weights large enough that the attention is selective (score standard
            # deviation ~4) rather than a near-uniform average over the whole sequence.
            for lin, std in ((self.q_proj, 2.0), (self.k_proj, 2.0), (self.v_proj, 1.0),
                             (self.o_proj, 1.0)):
                lin.weight.normal_(0.0, std / math.sqrt(d_model))
            for ln in (self.ln1, self.ln2):
                ln.weight.copy_(1.0 + 0.2 * torch.randn(d_model))
                ln.bias.copy_(0.2 * torch.randn(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        nh = self.n_heads
        dh = d // nh
        h = self.ln1(x)
        q = self.q_proj(h).view(b, s, nh, dh).transpose(1, 2)
        k = self.k_proj(h).view(b, s, nh, dh).transpose(1, 2)
        v = self.v_proj(h).view(b, s, nh, dh).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        attn = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o_proj(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


# H200 eager 2.7 ms (measured): 112 GFLOP in fp32 plus ~1.1 GB of scores and elementwise traffic
batch = 8
seq_len = 512
d_model = 1024
n_heads = 16
d_hidden = 4096
SCALABLE_SIZES = ("batch", "seq_len")


def get_inputs():
    return [torch.randn(batch, seq_len, d_model)]


def get_init_inputs():
    return [d_model, n_heads, d_hidden]
