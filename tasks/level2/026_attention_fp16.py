import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention written out in fp16: softmax((Q @ K^T) * scale) @ V, with Q,
    K and V of shape (batch, heads, seq_len, head_dim), head_dim = 64 and scale = 1/8 (exact in
    fp16). Q and K are drawn with a standard deviation of 1.4, so the attention is moderately
    peaked rather than a near-uniform average.

    Eager PyTorch writes the fp16 score matrices, reads and writes them for the scale and the
    softmax and reads them again for the second GEMM; a flash-attention style kernel keeps a
    query block's scores on chip with an online softmax, so HBM traffic falls to Q, K, V and the
    output, and both GEMMs run on the tensor cores.
    """

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / head_dim ** 0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v)


# H200 eager 1.95 ms (measured; 0.32 ms once torch.compile maps it to flash attention): 1 GiB of
# fp16 scores written, read and written twice and read again; 137 GFLOP on the tensor cores
batch = 32
heads = 16
seq_len = 1024
head_dim = 64
SCALABLE_SIZES = ("batch", "seq_len")


def get_inputs():
    shape = (batch, heads, seq_len, head_dim)
    return [(torch.randn(shape) * 1.4).to(torch.float16),
            (torch.randn(shape) * 1.4).to(torch.float16),
            torch.randn(shape).to(torch.float16)]


def get_init_inputs():
    return [head_dim]
