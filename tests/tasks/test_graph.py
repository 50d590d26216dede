"""`tasks graph` shows a task's captured graph: inputs and weights, each op with its shapes and
class, and the ops of no class by name."""
from conftest import ROOT


def test_a_fused_chain_is_shown_op_by_op(tasks):
    task = ROOT / "tasks" / "level2" / "001_scale_bias_leaky_relu_clamp.py"
    result = tasks.run("graph", str(task))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(l.split()[:2] == ["input", "x"] and "(32768, 8192) float32" in l for l in lines)
    ops = [l.split()[2] for l in lines if l.startswith("elementwise")]
    assert ops == ["aten.mul.Tensor", "aten.add.Tensor", "aten.leaky_relu.default",
                   "aten.clamp.default"]
    assert lines[-1] == "all 4 ops classified"

    shrunk = tasks.run("graph", str(task), "--shrink", "64")
    assert "(512, 8192) float32" in shrunk.stdout


def test_an_op_of_no_class_is_named(tasks):
    task = ROOT / "tasks" / "level1" / "044_cross_entropy_per_sample.py"
    result = tasks.run("graph", str(task))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "ops of no class: aten.cross_entropy_loss.default"


def test_json_is_the_graph_ir_itself(tasks):
    import json
    result = tasks.run("graph", str(ROOT / "tasks" / "level1" / "001_relu.py"), "--json")
    graph = json.loads(result.stdout)
    assert graph["schema"] == "cuda-agent.graph/1"
    assert [n["op"] for n in graph["nodes"]] == ["aten.relu.default"]


def test_a_task_that_does_not_load_is_a_clear_error(tasks, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nimport not_installed_anywhere\n\nclass Model(torch.nn.Module):"
                      "\n    pass\n\ndef get_inputs():\n    return []\n\n"
                      "def get_init_inputs():\n    return []\n")
    result = tasks.run("graph", str(broken))
    assert result.returncode == 2
    assert "cannot capture the graph" in result.stderr and "not_installed_anywhere" in result.stderr
