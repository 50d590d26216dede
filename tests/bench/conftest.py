"""Benchmark runs end to end on the CPU device: the real binary, a few built-in tasks at reduced
sizes through the synthesizer, run locally, killed and resumed, and on a local Ray cluster."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    parser.addoption("--binary", default=str(ROOT / "build" / "cuda-agent"),
                     help="the cuda-agent binary under test")
