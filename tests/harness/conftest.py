"""Shared by the harness tests: the harness folder on sys.path, and a C++ library builder."""

import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"
sys.path.insert(0, str(HARNESS))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds; still part of the default run")


def build_library(folder: Path, name: str, source: str) -> Path:
    """Compiles C++ source into folder/lib{name}.so the way the evaluator does on the CPU."""
    cpp = folder / f"{name}.cpp"
    cpp.write_text(source)
    library = folder / f"lib{name}.so"
    subprocess.run(["g++", "-O3", "-shared", "-fPIC", "-fopenmp", str(cpp), "-o", str(library)],
                   check=True)
    return library
