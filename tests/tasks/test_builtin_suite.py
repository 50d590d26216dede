"""The built-in suite passes `tasks check` on the CPU device at reduced sizes: every task runs in
eager and under torch.compile, is deterministic and is not degenerate. (Its runtime window is an
H200 figure, measured by bench/tasks_suite.py.)"""
import json

from conftest import ROOT

SHRINK = 64


def test_every_builtin_task_passes_the_filters_at_reduced_sizes(tasks, tmp_path):
    report_path = tmp_path / "builtin.json"
    result = tasks.run("check", str(ROOT / "tasks"), "--device", "cpu", "--shrink", str(SHRINK),
                       "--jobs", "2", "--timing-budget", "0.02", "--report", str(report_path),
                       timeout=1500)
    report = json.loads(report_path.read_text())
    dropped = {t["id"]: t["reasons"] for t in report["tasks"] if not t["kept"]}
    assert result.returncode == 0 and not dropped, dropped
    assert report["shrink"] == SHRINK and report["window_ms"] is None
    levels = {t["level"] for t in report["tasks"]}
    assert levels == {"level1", "level2", "level3"}
    # Each task says which sizes it ran at, and every one of them shrank.
    for t in report["tasks"]:
        sizes = t["measurement"]["sizes"]
        assert sizes, f"{t['id']} names no SCALABLE_SIZES"
        assert any(used < full for full, used in sizes.values()), t["id"]
