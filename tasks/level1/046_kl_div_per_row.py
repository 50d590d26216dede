import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """KL divergence per row, KL(p || q) = sum_j p_j (log p_j - log q_j), between
    distributions over 1024 outcomes, given log q (log-probabilities) and p (probabilities), as
    F.kl_div computes it with reduction='none', summed over each row.

    Eager computes xlogy(p, p), p * log_q and their difference as separate full-size tensors
    before the row sum; a fused kernel reads p and log_q once, accumulates each row's sum in
    registers and writes one float per row.
    """

    def __init__(self):
        super().__init__()

    def forward(self, log_q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return F.kl_div(log_q, p, reduction="none").sum(dim=1)


# H200 eager 2.3 ms (measured): several passes over 1.1 GB tensors
rows = 262144
outcomes = 1024
SCALABLE_SIZES = ("rows",)


def get_inputs():
    # Different temperatures per row for q and p, so that the divergences spread.
    log_q = torch.log_softmax(torch.randn(rows, outcomes) * (torch.rand(rows, 1) * 2 + 0.5), 1)
    p = torch.softmax(torch.randn(rows, outcomes) * (torch.rand(rows, 1) * 2 + 0.5), 1)
    return [log_q, p]


def get_init_inputs():
    return []
