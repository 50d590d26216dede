"""Runs one stage of the evaluator on this workspace and prints what it found."""
import json
import os
import subprocess
import sys


def run_stage(stage: str) -> int:
    workspace = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(workspace, ".cuda-agent", "workspace.json")) as f:
        config = json.load(f)
    command = [config["binary"], "eval", workspace, "--stage", stage, "--store", config["store"],
               "--device", config["device"]] + sys.argv[1:]
    # At the run's sizes, unless the command chose its own.
    if not any(a == "--shrink" or a.startswith("--shrink=") for a in sys.argv[1:]):
        command += ["--shrink", str(config.get("shrink", 1))]
    if config.get("precision", "fp32") == "tf32":  # as the run's own evaluations
        command.append("--tf32")
    return subprocess.call(command)
