"""S11: lowers the precision of an fp32 task behind the evaluator's back: at import, TF32 is
allowed in cuBLAS and cuDNN and fp32 matmuls may use reduced precision. The rest is the honest
candidate (torch.mm for the GEMM, a kernel for the epilogue)."""
import torch
import torch.nn as nn

from utils.kernels import load

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("medium")

lib = load()
bias_relu = lib.bind("bias_relu", "tensor", "tensor", "i64", "i64", "stream")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        rows, cols = y.shape
        bias_relu(y, self.linear.bias, rows, cols)
        return y
