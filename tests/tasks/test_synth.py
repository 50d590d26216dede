"""`tasks synth` composes valid, distinct tasks from its operator library, the same ones for the
same seed, and what it writes passes `tasks check`."""
import json
from pathlib import Path

COUNT = 8


def synth(tasks, out: Path, seed: int, *extra: str) -> dict[str, str]:
    result = tasks.run("synth", "--count", str(COUNT), "--seed", str(seed), "--out", str(out),
                       *extra)
    assert result.returncode == 0, result.stderr
    return {p.name: p.read_text() for p in sorted(out.glob("*.py"))}


def test_the_same_seed_writes_the_same_distinct_tasks(tasks, tmp_path):
    first = synth(tasks, tmp_path / "a", 11)
    again = synth(tasks, tmp_path / "b", 11)
    other = synth(tasks, tmp_path / "c", 12)
    assert len(first) == COUNT and first == again
    assert len(set(first.values())) == COUNT  # distinct
    assert set(first.values()).isdisjoint(other.values())
    manifest = json.loads((tmp_path / "a" / "suite.json").read_text())
    assert "11" in manifest["source"]


def test_an_occupied_folder_is_refused(tasks, tmp_path):
    out = tmp_path / "full"
    out.mkdir()
    (out / "mine.py").write_text("x = 1\n")
    result = tasks.run("synth", "--count", "2", "--seed", "1", "--out", str(out))
    assert result.returncode == 2 and "not empty" in result.stderr


def test_synthesized_tasks_pass_the_filters(tasks, tmp_path):
    out = tmp_path / "synth"
    synth(tasks, out, 2026)
    report_path = tmp_path / "report.json"
    result = tasks.run("check", str(out), "--device", "cpu", "--shrink", "64", "--jobs", "2",
                       "--timing-budget", "0.02", "--report", str(report_path))
    report = json.loads(report_path.read_text())
    dropped = {t["id"]: t["reasons"] for t in report["tasks"] if not t["kept"]}
    assert result.returncode == 0 and not dropped, dropped
    assert len(report["tasks"]) == COUNT
