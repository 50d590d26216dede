import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross-entropy loss per sample (reduction='none'): for each row of logits over 4096
    classes and its integer target, logsumexp(row) - row[target].

    Eager runs log_softmax, writing a full (batch, classes) tensor, then gathers one value per
    row from it; a fused kernel reads each row once (online max and sum of exponentials), picks
    the target logit on the way and writes one float per row, about half the traffic.
    """

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


# H200 eager 1.5 ms (measured): log_softmax reads and writes 2.1 GB, then a gather
batch = 131072
classes = 4096
SCALABLE_SIZES = ("batch",)


def get_inputs():
    # A temperature per row (0.5 to 4) so that the per-sample losses spread widely.
    scale = torch.rand(batch, 1) * 3.5 + 0.5
    return [torch.randn(batch, classes) * scale, torch.randint(0, classes, (batch,))]


def get_init_inputs():
    return []
