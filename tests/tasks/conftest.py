"""Tests of `cuda-agent tasks`: the real binary, the real harness and torch, on the CPU device."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                     help="the cuda-agent binary under test")


class Tasks:
    def __init__(self, binary: str, home: Path):
        self.binary = binary
        self.home = home

    def run(self, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        """`cuda-agent tasks ARGS`, with the cache (imported suites, check measurements) in a
        folder of this test session's own."""
        env = {**os.environ, "XDG_CACHE_HOME": str(self.home / "cache")}
        return subprocess.run([self.binary, "--store", str(self.home / "store.sqlite"), "tasks",
                               *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def tasks(request, tmp_path_factory) -> Tasks:
    return Tasks(request.config.getoption("--binary"), tmp_path_factory.mktemp("tasks"))
