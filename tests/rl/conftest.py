"""RL end to end on the CPU device: rollouts in groups against a model server on loopback, the
exports read back with the readers trainers use, and the evaluation service under concurrent
clients."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLE = ROOT / "examples" / "scale_bias_relu"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "agent"))  # the scripted server's vLLM-shaped replies
sys.path.insert(0, str(ROOT / "harness"))  # the reward adapter


def pytest_addoption(parser):
    parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                     help="the cuda-agent binary under test")


class Cli:
    """The cuda-agent binary with a store and a cache of this test session's own."""

    def __init__(self, binary: str, home: Path):
        self.binary = binary
        self.home = home
        self.store = home / "store.sqlite"
        self.env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache"),
                    "TMPDIR": str(home / "tmp")}
        (home / "tmp").mkdir(exist_ok=True)

    def argv(self, *args: str) -> list[str]:
        return [self.binary, "--store", str(self.store), *args]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout,
                              env=self.env)


@pytest.fixture(scope="session")
def cli(request, tmp_path_factory) -> Cli:
    return Cli(request.config.getoption("--binary"), tmp_path_factory.mktemp("rl"))


@pytest.fixture(scope="session")
def suite(tmp_path_factory) -> Path:
    """A suite of one task: the example, smaller (256 rows) for CI's two cores."""
    folder = tmp_path_factory.mktemp("suite")
    (folder / "suite.json").write_text(json.dumps({"name": "rl-test", "description": "one task"}))
    source = (EXAMPLE / "scale_bias_relu.py").read_text()
    assert "rows = 4096" in source
    (folder / "scale_bias_relu.py").write_text(source.replace("rows = 4096", "rows = 256"))
    return folder


def good_files() -> dict[str, str]:
    return {"model_new.py": (EXAMPLE / "model_new.py").read_text(),
            "kernels/scale_bias_relu.cpp": (EXAMPLE / "kernels_cpu" / "scale_bias_relu.cpp").read_text()}


def wrong_files() -> dict[str, str]:
    """Compiles and runs, and forgets the bias."""
    files = good_files()
    kernel = files["kernels/scale_bias_relu.cpp"]
    assert "+ bias[c]" in kernel
    files["kernels/scale_bias_relu.cpp"] = kernel.replace("+ bias[c]", "")
    return files
