import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention pooling of a sequence with a learned query: scores = (x @ q) * scale over the
    sequence, weights = softmax(scores), y = weights @ x, turning x of shape (batch, seq_len,
    dim) into one (batch, dim) vector per sample. The scale, 1.5 / sqrt(dim), makes the weights
    moderately peaked.

    Memory bound: eager PyTorch reads x once for the scores and again for the weighted sum, with
    two small launches between. A fused kernel gives each sample's rows to one thread block, which
    computes the scores, keeps a running (online) softmax and accumulates the weighted sum in one
    pass over x.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.query = nn.Parameter(torch.randn(dim))
        self.scale = 1.5 / dim ** 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(x, self.query) * self.scale
        weights = torch.softmax(scores, dim=1)
        return torch.bmm(weights.unsqueeze(1), x).squeeze(1)


# H200 eager 1.1 ms (measured): two reads of a 2 GiB input
batch = 8192
seq_len = 128
dim = 512
SCALABLE_SIZES = ("batch", "seq_len")


def get_inputs():
    return [torch.randn(batch, seq_len, dim)]


def get_init_inputs():
    return [dim]
