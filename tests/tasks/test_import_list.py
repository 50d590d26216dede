"""`tasks import` turns a KernelBench checkout and Ops-6K-format records (Parquet, as the Hugging
Face dataset ships them, and JSON Lines) into suites that `tasks list` shows."""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def task_source(expression: str, doc: str) -> str:
    return (f'import torch\n\n\nclass Model(torch.nn.Module):\n    """{doc}"""\n\n'
            f"    def forward(self, x):\n        return {expression}\n\n\n"
            "def get_inputs():\n    return [torch.randn(8, 8)]\n\n\n"
            "def get_init_inputs():\n    return []\n")


def listing(tasks) -> str:
    result = tasks.run("list")
    assert result.returncode == 0, result.stderr
    return result.stdout


def level_counts(text: str, suite: str) -> dict[str, int]:
    """{level: count} of one suite in `tasks list`'s output."""
    counts, inside = {}, False
    for line in text.splitlines():
        if not line.startswith(" "):
            inside = line.split()[0] == suite
        elif inside:
            level, count = line.split()
            counts[level] = int(count)
    return counts


def test_the_builtin_suite_is_listed_with_its_levels(tasks):
    counts = level_counts(listing(tasks), "builtin")
    assert counts["level1"] >= 40 and counts["level2"] >= 40 and counts["level3"] >= 10, counts


def test_a_kernelbench_checkout_becomes_a_suite(tasks, tmp_path):
    checkout = tmp_path / "KernelBench"
    for level, name, expression in [("level1", "1_Square", "x * x"),
                                    ("level1", "2_Tanh", "torch.tanh(x)"),
                                    ("level2", "1_Tanh_Scale", "torch.tanh(x) * 2")]:
        path = checkout / "KernelBench" / level / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task_source(expression, name))
    (checkout / "KernelBench" / "level1" / "notes.py").write_text("print('not a task')\n")

    result = tasks.run("import", "kernelbench", str(checkout))
    assert result.returncode == 0, result.stderr
    assert "imported 3 tasks" in result.stdout
    assert "notes.py" in result.stderr  # skipped, with the reason
    assert level_counts(listing(tasks), "kernelbench") == {"level1": 2, "level2": 1}

    # Importing into the same folder again is refused rather than mixed in.
    again = tasks.run("import", "kernelbench", str(checkout))
    assert again.returncode == 2 and "not empty" in again.stderr


def ops6k_rows() -> list[dict]:
    return [
        {"ops": ["relu"], "data_source": "torch#1", "code": task_source("torch.relu(x)", "a")},
        {"ops": ["mul", "sigmoid"], "data_source": "torch#2",
         "code": task_source("torch.sigmoid(x * 3)", "b")},
        {"ops": ["mul", "tanh", "add"], "data_source": "torch#3",
         "code": task_source("torch.tanh(x * 2) + 1", "c")},
        {"ops": ["relu"], "data_source": "torch#1", "code": "not python at all"},
    ]


def test_ops6k_parquet_and_jsonl_give_the_same_suite(tasks, tmp_path):
    rows = ops6k_rows()
    parquet = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))

    suites = {}
    for source, name in [(parquet, "ops6k-parquet"), (jsonl, "ops6k-jsonl")]:
        result = tasks.run("import", "ops6k", str(source), "--name", name)
        assert result.returncode == 0, result.stderr
        assert "imported 3 tasks" in result.stdout and "1 skipped" in result.stdout
        suites[name] = level_counts(listing(tasks), name)
    assert suites["ops6k-parquet"] == suites["ops6k-jsonl"] == {"level1": 1, "level2": 2}

    # The same records give the same ids, whatever the file format.
    home = tasks.home / "cache" / "cuda-agent" / "suites"
    manifests = [json.loads((home / n / "suite.json").read_text()) for n in suites]
    ids = [sorted(t["id"] for t in m["tasks"]) for m in manifests]
    assert ids[0] == ids[1] and len(ids[0]) == 3


def test_a_file_that_is_not_parquet_is_a_clear_error(tasks, tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_text("this is not parquet")
    result = tasks.run("import", "ops6k", str(bad), "--name", "broken")
    assert result.returncode == 2
    assert "cannot read" in result.stderr and "Parquet" in result.stderr
