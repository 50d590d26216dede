"""End-to-end tests: the real cuda-agent binary, the real harness and torch, on the CPU device."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scale_bias_relu"


def pytest_addoption(parser):
    parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                     help="the cuda-agent binary under test")


class CudaAgent:
    """Runs the binary against one store and build cache shared by a test session, so baselines
    are timed once and kernels compiled once, as they would be for a user."""

    def __init__(self, binary: str, home: Path):
        self.binary = binary
        self.store = home / "store.sqlite"
        self.cache = home / "build-cache"
        # The evaluator's run folders beneath the store's folder, as for a user who keeps the
        # store in /tmp: that folder is read-only to candidates, their run folder must not be.
        self.env = {**os.environ, "TMPDIR": str(home / "tmp")}
        (home / "tmp").mkdir()

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        command = [self.binary, "--store", str(self.store), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def eval(self, task: Path, candidate: Path, *extra: str) -> tuple[int, dict]:
        """Evaluates candidate (a folder with model_new.py and kernels/) on the cpu device and
        returns the exit code and the JSON record (empty when none was printed)."""
        result = self.run("eval", "--device", "cpu", "--json", "--cache-dir", str(self.cache),
                          "--task", str(task), "--candidate", str(candidate / "model_new.py"),
                          "--kernels", str(candidate / "kernels"), *extra)
        record = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
        if result.returncode not in (0, 1):
            record["_stderr"] = result.stderr
        return result.returncode, record


def verdict(record: dict) -> str:
    """What a failed evaluation's record says, whole where pytest would cut the record short:
    its reason, violations and each stage's status (a flaky failure is then explained by its
    first occurrence)."""
    stages = {name: stage.get("status") for name, stage in record.get("stages", {}).items()}
    return (f"reason: {record.get('reason')}\nviolations: {json.dumps(record.get('violations'))}"
            f"\nstages: {json.dumps(stages)}\nstderr: {record.get('_stderr', '')}")


@pytest.fixture(scope="session")
def agent(request, tmp_path_factory) -> CudaAgent:
    return CudaAgent(request.config.getoption("--binary"), tmp_path_factory.mktemp("agent"))


@pytest.fixture(scope="session")
def task(tmp_path_factory) -> Path:
    """The example task at a size that keeps CI's two cores quick (fewer rows, same features)."""
    source = (EXAMPLE / "scale_bias_relu.py").read_text()
    assert "rows = 4096" in source
    path = tmp_path_factory.mktemp("task") / "scale_bias_relu.py"
    path.write_text(source.replace("rows = 4096", "rows = 512"))
    return path


@pytest.fixture
def candidate(tmp_path) -> "Candidate":
    return Candidate(tmp_path / "candidate")


class Candidate:
    """A copy of the example's correct CPU candidate that a test may then break on purpose."""

    def __init__(self, path: Path):
        path.mkdir(parents=True)
        shutil.copy(EXAMPLE / "model_new.py", path / "model_new.py")
        shutil.copytree(EXAMPLE / "kernels_cpu", path / "kernels")
        self.path = path
        self.kernel = path / "kernels" / "scale_bias_relu.cpp"
        self.model_new = path / "model_new.py"

    def edit(self, file: Path, old: str, new: str) -> None:
        text = file.read_text()
        assert old in text, f"{old!r} not in {file}"
        file.write_text(text.replace(old, new))
