"""Tasks in KernelBench's format, at each of its levels, load and prepare: a single operator with
size constants, a fused sequence with constructor arguments, a small network built from nn
modules, a task returning several outputs. The task files are our own, written in that format."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import HARNESS

LEVEL1_MATMUL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """C = A @ B for square matrices."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)

N = 96

def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]

def get_init_inputs():
    return []  # no parameters
'''

LEVEL2_CONV_FUSION = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Convolution, then a per-channel bias, then GELU, then a mean over the spatial axes."""
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        x = self.conv(x)
        x = torch.nn.functional.gelu(x + self.bias)
        return x.mean(dim=[2, 3])

batch_size = 4
in_channels = 3
out_channels = 8
height, width = 16, 16
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''

LEVEL3_MLP = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        """A multi-layer perceptron with ReLU between its layers."""
        super(Model, self).__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)

batch_size = 8
input_size = 64
layer_sizes = [128, 32]
output_size = 10

def get_inputs():
    return [torch.randn(batch_size, input_size)]

def get_init_inputs():
    return [input_size, layer_sizes, output_size]
'''

TWO_OUTPUTS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Returns the row maxima and their positions."""
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        values, indices = torch.max(x, dim=self.dim)
        return values, indices

def get_inputs():
    return [torch.randn(32, 48), ]

def get_init_inputs():
    return [1]
'''

CASES = {
    "level1_matmul": (LEVEL1_MATMUL, [{"shape": [96, 96], "dtype": "float32"}] * 2, [[96, 96]]),
    "level2_conv_fusion": (LEVEL2_CONV_FUSION, [{"shape": [4, 3, 16, 16], "dtype": "float32"}],
                           [[4, 8]]),
    "level3_mlp": (LEVEL3_MLP, [{"shape": [8, 64], "dtype": "float32"}], [[8, 10]]),
    "two_outputs": (TWO_OUTPUTS, [{"shape": [32, 48], "dtype": "float32"}], [[32], [32]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernelbench_format_task_prepares(tmp_path: Path, name: str) -> None:
    source, inputs, output_shapes = CASES[name]
    task = tmp_path / f"{name}.py"
    task.write_text(source)
    report_path = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-E", "-s", str(HARNESS / "prepare.py"), "--task",
                           str(task), "--device", "cpu", "--seed", "11", "--init-seed", "5",
                           "--verify-sets", "2", "--profile-sets", "1", "--out", str(tmp_path),
                           "--report", str(report_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["ok"], report
    assert report["inputs"] == inputs
    assert [o["shape"] for o in report["outputs"]] == output_shapes
    init = torch.load(tmp_path / "init.pt", weights_only=True)
    assert isinstance(init["state_dict"], dict)
