import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Triplet margin loss per sample (reduction='none'): max(0, |a - p| - |a - n| + margin)
    with Euclidean distances (plus torch's eps of 1e-6 on the differences) between 256-wide
    anchor, positive and negative embeddings.

    Eager materialises a - p + eps and a - n + eps and reduces each with a norm; a fused kernel
    reads the three rows once, accumulates both squared distances in registers and writes one
    float per sample.
    """

    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor,
                negative: torch.Tensor) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin,
                                     reduction="none")


# H200 eager 1.6 ms (measured): several passes over 0.54 GB tensors
rows = 524288
dim = 256
SCALABLE_SIZES = ("rows",)


def get_inputs():
    # Positives and negatives at per-row distances from the anchor, so that about half of the
    # triplets violate the margin, by varying amounts.
    anchor = torch.randn(rows, dim)
    positive = anchor + torch.randn(rows, dim) * (torch.rand(rows, 1) + 0.2)
    negative = anchor + torch.randn(rows, dim) * (torch.rand(rows, 1) + 0.2)
    return [anchor, positive, negative]


def get_init_inputs():
    return [1.0]
