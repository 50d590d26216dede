"""The adversarial suite's fixtures: the cuda-agent binary run against one store and build cache
for the whole session (so each task's baselines are timed once), a private install root and
store for the attempts that write to them (B6), and the table of results printed at the end
(family | attempts | rejected | as expected | twins accepted), also written as JSON to
$CUDA_AGENT_ADVERSARIAL_JSON when that is set."""

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adversarial_cases import FAMILY_ORDER, GPU_ONLY, Attempt, Twin, rule_names

ROOT = Path(__file__).resolve().parents[2]
JSON_ENV = "CUDA_AGENT_ADVERSARIAL_JSON"
TEXT_ENV = "CUDA_AGENT_ADVERSARIAL_TABLE"  # the printed table, also as a text file (ctest's)


def pytest_addoption(parser):
    try:
        parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                         help="the cuda-agent binary under test")
    except ValueError:  # tests/e2e/conftest.py, collected in the same session, added it already
        pass


class CudaAgent:
    """Runs the binary against one store and build cache, with extra environment variables."""

    def __init__(self, binary: str, store: Path, cache: Path, env: dict[str, str] | None = None):
        self.binary = binary
        self.store = store
        self.cache = cache
        self.env = {**os.environ, **(env or {})}

    def eval(self, task: Path, candidate: Path, *extra: str) -> tuple[int, dict]:
        """Evaluates candidate (a folder with model_new.py and kernels/) on the cpu device and
        returns the exit code and the JSON record (empty when none was printed); `_stderr` holds
        the error output when the exit code is neither 0 nor 1, `_wall_s` the command's time."""
        command = [self.binary, "--store", str(self.store), "eval", "--device", "cpu", "--json",
                   "--cache-dir", str(self.cache), "--task", str(task),
                   "--candidate", str(candidate / "model_new.py"),
                   "--kernels", str(candidate / "kernels"), *extra]
        start = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, timeout=900,
                                env=self.env)
        record = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
        if result.returncode not in (0, 1):
            record["_stderr"] = result.stderr
        record["_wall_s"] = round(time.monotonic() - start, 2)
        return result.returncode, record


@pytest.fixture(scope="session")
def agent(request, tmp_path_factory) -> CudaAgent:
    home = tmp_path_factory.mktemp("agent")
    return CudaAgent(request.config.getoption("--binary"), home / "store.sqlite",
                     home / "build-cache")


@pytest.fixture
def isolated_agent(agent, tmp_path) -> CudaAgent:
    """An agent whose install root (a copy of harness/) and run store belong to this test alone:
    B6 attempts try to write to both, and one that gets through must spoil nothing else. The
    store is also named in $CUDA_AGENT_STORE, as a user may have it."""
    home = tmp_path / "install"
    shutil.copytree(ROOT / "harness", home / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "store.sqlite"
    return CudaAgent(agent.binary, store, agent.cache,
                     {"CUDA_AGENT_HOME": str(home), "CUDA_AGENT_STORE": str(store)})


# --- the table of results ----------------------------------------------------------------------


def describe(code: int, record: dict[str, Any]) -> str:
    """What the evaluator said, in a few words: the outcome and the rules of its violations."""
    if not record.get("outcome"):
        last = (record.get("_stderr") or "").strip().splitlines()[-1:] or ["no output"]
        return f"no verdict (exit {code}): {last[0][:120]}"
    text = record["outcome"]
    rules = sorted(rule_names(record, "violations"))
    if rules:
        text += ": " + ", ".join(rules)
    if record["outcome"] == "pass":
        text += f" (r={record.get('reward')})"
    return text


@dataclass
class Results:
    attempts: list[dict[str, Any]] = field(default_factory=list)
    twins: list[dict[str, Any]] = field(default_factory=list)

    def add_attempt(self, attempt: Attempt, code: int, record: dict[str, Any],
                    as_expected: bool) -> None:
        self.attempts.append({
            "id": attempt.id, "family": attempt.family, "attempt": attempt.name,
            "mode": attempt.mode, "task": attempt.task, "expected": attempt.expected(),
            "got": describe(code, record), "rejected": record.get("reward") == -1,
            "as_expected": as_expected, "reason": record.get("reason", ""),
            "wall_s": record.get("_wall_s")})

    def add_twin(self, twin: Twin, code: int, record: dict[str, Any], accepted: bool) -> None:
        self.twins.append({
            "id": twin.id, "twin": twin.name, "families": list(twin.families), "mode": twin.mode,
            "task": twin.task, "got": describe(code, record), "accepted": accepted,
            "reason": record.get("reason", ""), "wall_s": record.get("_wall_s")})

    def table(self) -> dict[str, Any]:
        rows = []
        for family in FAMILY_ORDER:
            attempts = [a for a in self.attempts if a["family"] == family]
            twins = [t for t in self.twins if family in t["families"]]
            if not attempts and not twins and family not in GPU_ONLY:
                continue
            rows.append({
                "family": family, "attempts": len(attempts),
                "rejected": sum(a["rejected"] for a in attempts),
                "as_expected": sum(a["as_expected"] for a in attempts),
                "twins": len(twins), "twins_accepted": sum(t["accepted"] for t in twins),
                "note": f"GPU only ({GPU_ONLY[family]}): bench/adversarial_gpu.py"
                        if family in GPU_ONLY and not attempts else ""})
        total = {"family": "total", "attempts": len(self.attempts),
                 "rejected": sum(a["rejected"] for a in self.attempts),
                 "as_expected": sum(a["as_expected"] for a in self.attempts),
                 "twins": len(self.twins), "twins_accepted": sum(t["accepted"] for t in self.twins),
                 "note": ""}
        return {"families": rows, "total": total, "attempts": self.attempts, "twins": self.twins}


RESULTS_KEY = pytest.StashKey[Results]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS_KEY] = Results()


@pytest.fixture(scope="session")
def results(request) -> Results:
    return request.config.stash[RESULTS_KEY]


def format_table(table: dict[str, Any]) -> list[str]:
    headers = ["family", "attempts", "rejected", "as expected", "twins accepted", ""]
    keys = ["family", "attempts", "rejected", "as_expected", None, "note"]

    def cells(row: dict[str, Any]) -> list[str]:
        return [f"{row['twins_accepted']}/{row['twins']}" if key is None else str(row[key])
                for key in keys]

    body = [cells(row) for row in table["families"]]
    total = cells(table["total"])
    widths = [max(len(h), *(len(r[i]) for r in body + [total])) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    rule = "  ".join("-" * w for w in widths).rstrip()
    lines = [line(headers), rule, *map(line, body), rule, line(total)]
    walls = [r["wall_s"] or 0 for r in table["attempts"] + table["twins"]]
    lines.append(f"{len(walls)} evaluations, {sum(walls):.0f} s")
    missed = [a for a in table["attempts"] if not a["as_expected"]]
    refused = [t for t in table["twins"] if not t["accepted"]]
    if missed:
        lines += ["", "attempts not rejected as expected:"]
        lines += [f"  {a['id']}: expected {a['expected']}; got {a['got']}" for a in missed]
    if refused:
        lines += ["", "twins not accepted:"]
        lines += [f"  {t['id']}: got {t['got']}" for t in refused]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    results = config.stash.get(RESULTS_KEY, None)
    if results is None or not (results.attempts or results.twins):
        return
    table = results.table()
    terminalreporter.write_sep("=", "adversarial suite (cpu)")
    lines = format_table(table)
    for text in lines:
        terminalreporter.write_line(text)
    if os.environ.get(TEXT_ENV):
        Path(os.environ[TEXT_ENV]).write_text("adversarial suite (cpu)\n" + "\n".join(lines) + "\n")
    path = os.environ.get(JSON_ENV)
    if path:
        Path(path).write_text(json.dumps(table, indent=2) + "\n")
        terminalreporter.write_line(f"written: {path}")
