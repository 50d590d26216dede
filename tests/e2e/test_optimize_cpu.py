"""`cuda-agent optimize TASK`: the built-in synthesizer writes a fused kernel and model_new.py
for an elementwise task, the evaluator verifies and times them, and a task it has no plan for is
refused with the ops named."""
import json
from pathlib import Path

from conftest import ROOT

AFFINE_CHAIN = ROOT / "tasks" / "level2" / "001_scale_bias_leaky_relu_clamp.py"


def optimize(agent, task: Path, workspace: Path, *extra: str):
    result = agent.run("optimize", str(task), "--device", "cpu", "--json", "--workspace",
                       str(workspace), *extra, timeout=900)
    record = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result, record


def test_an_elementwise_chain_becomes_one_verified_kernel(agent, tmp_path):
    result, r = optimize(agent, AFFINE_CHAIN, tmp_path / "ws", "--shrink", "64")
    assert result.returncode == 0, result.stderr
    assert r["correct"] and r["reward"] >= 1 and r["violations"] == []
    assert r["settings"]["task_sizes"] == {"rows": [32768, 512]}
    kernel = (tmp_path / "ws" / "kernels" / "fused_elementwise.cpp").read_text()
    assert "leaky_relu" in kernel.splitlines()[0]  # says what it fused
    assert "class ModelNew" in (tmp_path / "ws" / "model_new.py").read_text()


PER_CHANNEL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x * w + b) with a per-channel weight and bias over NCHW, then a tanh."""

    def __init__(self, channels: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(channels, 1, 1))
        self.b = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        return torch.tanh(torch.relu(x * self.w + self.b)) * 2


batch, channels, height, width = BATCH, CHANNELS, HEIGHT, WIDTH


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels]
'''


def per_channel_task(folder: Path, batch: int, channels: int, height: int, width: int) -> Path:
    source = PER_CHANNEL
    for name, value in [("BATCH", batch), ("CHANNELS", channels), ("HEIGHT", height),
                        ("WIDTH", width)]:
        source = source.replace(name, str(value))
    folder.mkdir(parents=True)
    path = folder / "per_channel.py"
    path.write_text(source)
    return path


def test_per_channel_broadcast_at_two_unrelated_shapes(agent, tmp_path):
    # The plan keys on how inputs broadcast, never on sizes: odd sizes exercise the row layout.
    for k, shape in enumerate([(4, 16, 32, 32), (3, 7, 13, 5)]):
        task = per_channel_task(tmp_path / f"task{k}", *shape)
        result, r = optimize(agent, task, tmp_path / f"ws{k}")
        assert result.returncode in (0, 1), result.stderr
        assert r["correct"] and r["reward"] >= 1, (shape, r.get("reason"))


def test_a_task_without_a_plan_is_refused_naming_its_ops(agent, tmp_path):
    task = ROOT / "tasks" / "level1" / "029_matmul_square.py"
    result, _ = optimize(agent, task, tmp_path / "ws", "--shrink", "64")
    assert result.returncode == 2
    assert "no plan" in result.stderr and "aten.matmul.default" in result.stderr
    assert not (tmp_path / "ws").exists()  # nothing laid out for nothing
