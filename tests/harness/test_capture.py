"""capture.py's graph IR: what `tasks check` compares tasks by and the synthesizer will read."""
import json
import types

import torch

import capture


def task_module(source: str) -> types.ModuleType:
    module = types.ModuleType("captured_task")
    exec(compile(source, "captured_task.py", "exec"), module.__dict__)
    return module


MLP = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.BatchNorm1d(features)
        self.norm.eval()

    def forward(self, x):
        y = self.norm(torch.relu(self.linear(x)))
        values, indices = torch.max(y, dim=-1)
        return values * 2, indices

rows = 1 << 20
features = 4096

def get_inputs():
    return [torch.randn(rows, features)]

def get_init_inputs():
    return [features]
'''


def test_a_full_size_task_is_traced_on_meta_with_its_values_described():
    graph = capture.capture_task(task_module(MLP), build=lambda: (_ for _ in ()).throw(
        AssertionError("a task that builds on meta needs no real build")))
    assert graph["schema"] == capture.SCHEMA and graph["traced_on"] == "meta"
    json.dumps(graph)  # plain JSON
    kinds = {i["name"]: i["kind"] for i in graph["inputs"]}
    assert sorted(kinds.values()).count("parameter") == 4  # linear and norm weights and biases
    assert "buffer" in kinds.values() and kinds["x"] == "input"
    x = next(i for i in graph["inputs"] if i["name"] == "x")
    assert x["shape"] == [1 << 20, 4096] and x["dtype"] == "float32"  # 16 GiB, never allocated
    ops = [n["op"] for n in graph["nodes"]]
    assert "aten.linear.default" in ops and "aten.relu.default" in ops
    linear = next(n for n in graph["nodes"] if n["op"] == "aten.linear.default")
    assert linear["args"][0] == {"ref": "x"}
    maximum = next(n for n in graph["nodes"] if n["op"].startswith("aten.max"))
    assert maximum["dtype"] == ["float32", "int64"]  # a node with two results
    assert "operator.getitem" in ops  # its results taken apart, named as Python names it
    assert len(graph["outputs"]) == 2


NEEDS_DATA = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        weight = torch.randn(8)
        self.scale = float(weight.abs().max().item())  # needs real numbers

    def forward(self, x):
        return torch.tanh(x) * self.scale

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
'''


def test_a_task_that_needs_real_data_is_traced_on_what_build_gives():
    task = task_module(NEEDS_DATA)
    graph = capture.capture_task(task, build=lambda: (task.Model(), [torch.randn(4, 8)]))
    assert graph["traced_on"] == "real"
    assert [n["op"] for n in graph["nodes"]] == ["aten.tanh.default", "aten.mul.Tensor"]
