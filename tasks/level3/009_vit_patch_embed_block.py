import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _sincos_position_table(grid: int, dim: int) -> torch.Tensor:
    """Fixed 2-D sine-cosine position embeddings for a grid x grid patch layout, (grid^2, dim)."""
    quarter = dim // 4
    omega = 1.0 / (10000.0 ** (torch.arange(quarter, dtype=torch.float32) / quarter))
    coords = torch.arange(grid, dtype=torch.float32)
    ys, xs = torch.meshgrid(coords, coords, indexing="ij")
    ay = torch.outer(ys.flatten(), omega)
    ax = torch.outer(xs.flatten(), omega)
    return torch.cat((ay.sin(), ay.cos(), ax.sin(), ax.cos()), dim=1)


class Model(nn.Module):
    """A Vision Transformer's front end: a 16x16 stride-16 patch-embedding convolution turns each
    image of grid x grid patches (3x256x256, 256 patches, at full size) into tokens of width 512,
    fixed 2-D sine-cosine position embeddings are added, a learned class token is prepended, then
    one pre-norm encoder block runs (8-head self-attention with one fused QKV linear, written as
    matmul + softmax + matmul, and a GELU MLP of width 2048). Returns all grid^2 + 1 tokens.

    Eager PyTorch runs the patch embedding as a convolution, then copies tokens for the
    transpose, the position add and the concatenation before the block; inside the block it
    materialises the (257 x 257) scores per head and runs norms, biases, GELU and residual adds
    as separate passes. A fused version treats the patch embedding as a GEMM over unfolded
    patches whose epilogue adds the position embedding and writes straight into the token
    buffer, uses flash attention, and folds GELU and the residual adds into GEMM epilogues.
    """

    def __init__(self, in_channels: int, patch: int, grid: int, d_model: int, n_heads: int,
                 d_hidden: int):
        super().__init__()
        self.n_heads = n_heads
        self.patch_embed = nn.Conv2d(in_channels, d_model, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model))
        self.register_buffer("pos_embed", _sincos_position_table(grid, d_model).unsqueeze(0))
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        with torch.no_grad():
            # Query and key weights large enough that attention is selective (score standard
            # deviation ~4) rather than a near-uniform average over all tokens.
            std = 1.0 / math.sqrt(d_model)
            self.qkv.weight[: 2 * d_model].normal_(0.0, 2.0 * std)
            self.qkv.weight[2 * d_model:].normal_(0.0, std)
            self.proj.weight.normal_(0.0, std)
            for ln in (self.ln1, self.ln2):
                ln.weight.copy_(1.0 + 0.2 * torch.randn(d_model))
                ln.bias.copy_(0.2 * torch.randn(d_model))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2) + self.pos_embed
        b, n, d = x.shape
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        s = n + 1
        nh = self.n_heads
        dh = d // nh
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, nh, dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh)), dim=-1)
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


# H200 eager 4.0 ms (measured): 125 GFLOP in fp32 plus ~1.4 GB of token, score and MLP traffic.
# Images are grid * patch pixels on a side, so every grid from 1 up is valid.
batch = 64
in_channels = 3
patch = 16
grid = 16
d_model = 512
n_heads = 8
d_hidden = 2048
SCALABLE_SIZES = ("batch", "grid")


def get_inputs():
    return [torch.randn(batch, in_channels, grid * patch, grid * patch)]


def get_init_inputs():
    return [in_channels, patch, grid, d_model, n_heads, d_hidden]
