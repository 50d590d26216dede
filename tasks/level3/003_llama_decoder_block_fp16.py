import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    """A LLaMA-style decoder block in fp16 on (batch, seq_len, d_model) tokens:
    h = x + Wo(causal_softmax(rope(Q) rope(K)^T / sqrt(d_head)) V) with Q, K, V from
    RMSNorm(x); y = h + W_down(silu(W_gate g) * W_up g) with g = RMSNorm(h). Rotary position
    tables and the causal mask are precomputed buffers; no linear has a bias.

    Eager PyTorch runs each RMSNorm as five elementwise/reduction passes, applies the rotary
    embedding with slices, negation and concatenation, materialises the full (seq x seq) score
    matrix per head (half of it masked to -inf), and writes the SwiGLU's two hidden tensors
    before multiplying them. A fused version computes each norm in one pass, applies rope in the
    QKV GEMM's epilogue, runs causal flash attention that skips the masked tiles, and merges the
    gate and up projections into one GEMM whose epilogue applies silu(gate) * up.
    """

    def __init__(self, d_model: int, n_heads: int, d_hidden: int, max_seq_len: int):
        super().__init__()
        self.n_heads = n_heads
        self.eps = 1e-5
        d_head = d_model // n_heads
        self.attn_norm = nn.Parameter(1.0 + 0.2 * torch.randn(d_model))
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.mlp_norm = nn.Parameter(1.0 + 0.2 * torch.randn(d_model))
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)
        with torch.no_grad():
            # Query and key weights large enough that attention is selective (score standard
            # deviation ~1.4, about a hundred effective keys per row at seq_len 1024) instead of
            # a near-uniform average, yet not so sharp that fp16 rounding of the scores dominates.
            for lin, std in ((self.wq, 1.2), (self.wk, 1.2), (self.wv, 1.0), (self.wo, 1.0),
                             (self.w_gate, 1.0), (self.w_up, 1.0)):
                lin.weight.normal_(0.0, std / math.sqrt(d_model))
            self.w_down.weight.normal_(0.0, 1.0 / math.sqrt(d_hidden))
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos())
        self.register_buffer("rope_sin", angles.sin())
        self.register_buffer(
            "causal_mask",
            torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1))
        self.to(torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        nh = self.n_heads
        dh = d // nh
        h = _rms_norm(x, self.attn_norm, self.eps)
        q = self.wq(h).view(b, s, nh, dh).transpose(1, 2)
        k = self.wk(h).view(b, s, nh, dh).transpose(1, 2)
        v = self.wv(h).view(b, s, nh, dh).transpose(1, 2)
        cos = self.rope_cos[:s]
        sin = self.rope_sin[:s]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        scores = scores.masked_fill(self.causal_mask[:s, :s], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.wo(ctx)
        g = _rms_norm(x, self.mlp_norm, self.eps)
        return x + self.w_down(F.silu(self.w_gate(g)) * self.w_up(g))


# H200 eager 3.4 ms (measured): 0.91 TFLOP on fp16 tensor cores plus ~2.5 GB of scores, softmax
# and elementwise traffic. Eager fp16 stays within 0.6 of the tolerance of an fp32 evaluation.
batch = 8
seq_len = 1024
d_model = 2048
n_heads = 16
d_hidden = 5632
SCALABLE_SIZES = ("batch", "seq_len")


def get_inputs():
    return [torch.randn(batch, seq_len, d_model, dtype=torch.float16)]


def get_init_inputs():
    return [d_model, n_heads, d_hidden, seq_len]
