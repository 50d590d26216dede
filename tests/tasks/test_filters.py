"""Every filter of `tasks check` drops a task it must drop and keeps its near miss. The fixtures
say what they expect by name: drop_<reason>.py must be dropped for <reason>, keep_*.py kept."""
import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "filters"
REFERENCE = HERE / "reference"


def check(tasks, report: Path, work: Path):
    return tasks.run("check", str(FIXTURES), "--device", "cpu", "--jobs", "2",
                     "--window-ms", "0", "150", "--reference", str(REFERENCE),
                     "--task-timeout", "15", "--timing-budget", "0.02", "--report", str(report),
                     "--work-dir", str(work))


def test_each_filter_drops_its_task_and_keeps_its_near_miss(tasks, tmp_path):
    report_path = tmp_path / "report.json"
    result = check(tasks, report_path, tmp_path / "work")
    assert result.returncode == 1, result.stdout + result.stderr  # some were dropped
    report = json.loads(report_path.read_text())
    assert report["schema"] == "cuda-agent.tasks-check/1"
    assert report["window_ms"] == [0, 150]
    verdicts = {t["id"]: t for t in report["tasks"]}
    assert set(verdicts) == {p.stem for p in FIXTURES.glob("*.py")}
    for name, verdict in verdicts.items():
        reasons = [r["name"] for r in verdict["reasons"]]
        if name.startswith("keep_"):
            assert verdict["kept"], f"{name} was dropped: {verdict['reasons']}"
        else:
            expected = name.removeprefix("drop_")
            assert not verdict["kept"] and expected in reasons, \
                f"{name}: expected {expected}, got {verdict['reasons']}"
            assert all(r["detail"] for r in verdict["reasons"])
    similar = verdicts["drop_too_similar"]["most_similar"]
    assert similar["task"] == "reference:linear_relu_scale" and similar["similarity"] >= 0.9
    assert "input 1" in verdicts["drop_insensitive_to_input"]["reasons"][0]["detail"]
    # The table names each dropped task and its reason; progress went to stderr as it happened.
    assert "drop_fails_in_eager: fails_in_eager:" in result.stdout
    assert result.stderr.count("] ") >= len(verdicts)

    # Checked again, nothing is measured anew and the verdicts are the same.
    began = time.monotonic()
    again = check(tasks, tmp_path / "again.json", tmp_path / "work")
    assert time.monotonic() - began < 20
    assert again.returncode == 1
    assert json.loads((tmp_path / "again.json").read_text())["dropped"] == report["dropped"]
