"""The agent end to end: the real cuda-agent binary, its tools and the evaluator on the CPU
device, against a scripted OpenAI-compatible server on loopback."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLE = ROOT / "examples" / "scale_bias_relu"
sys.path.insert(0, str(HERE))


def pytest_addoption(parser):
    parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                     help="the cuda-agent binary under test")


class Episode:
    """What one `optimize --policy llm` printed, and its trajectory from the store."""

    def __init__(self, result: subprocess.CompletedProcess, trajectory: dict | None):
        self.returncode = result.returncode
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.record = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
        self.trajectory = trajectory

    def tool_outputs(self) -> list[dict]:
        return [c for t in self.trajectory["turns"] for c in t["tool_calls"]]


class Agent:
    def __init__(self, binary: str, home: Path):
        self.binary = binary
        self.home = home
        self.store = home / "store.sqlite"
        self.count = 0

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        env = {"XDG_CACHE_HOME": str(self.home / "cache")}
        import os
        return subprocess.run([self.binary, "--store", str(self.store), *args], capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **env})

    def episode(self, task: Path, url: str, *extra: str) -> Episode:
        self.count += 1
        workspace = self.home / f"episode-{self.count}"
        result = self.run("optimize", str(task), "--device", "cpu", "--policy", "llm",
                          "--endpoint", url, "--model", "scripted", "--json",
                          "--workspace", str(workspace), *extra)
        trajectory = None
        run = json.loads(result.stdout).get("run") if result.stdout.strip().startswith("{") else None
        if run:
            shown = self.run("show", run, "--json")
            assert shown.returncode == 0, shown.stderr
            trajectory = json.loads(shown.stdout)
        return Episode(result, trajectory)


@pytest.fixture(scope="session")
def agent(request, tmp_path_factory) -> Agent:
    return Agent(request.config.getoption("--binary"), tmp_path_factory.mktemp("agent"))


@pytest.fixture(scope="session")
def task(tmp_path_factory) -> Path:
    """The example task, smaller (fewer rows, the same features) for CI's two cores."""
    source = (EXAMPLE / "scale_bias_relu.py").read_text()
    assert "rows = 4096" in source
    path = tmp_path_factory.mktemp("task") / "scale_bias_relu.py"
    path.write_text(source.replace("rows = 4096", "rows = 256"))
    return path
