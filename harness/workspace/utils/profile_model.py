"""Profiles model.py on this workspace's device: its time a call, and where that time goes, op by
op. Run it first, to see what is worth fusing. The sizes are the evaluation's (its --shrink);
pass --shrink K to choose, --rows N for more ops."""
import json
import os
import subprocess
import sys

workspace = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(workspace, ".cuda-agent", "workspace.json")) as f:
    config = json.load(f)
arguments = sys.argv[1:]
if not any(a.startswith("--shrink") for a in arguments):
    arguments += ["--shrink", str(config.get("shrink", 1))]
environment = dict(os.environ, KINETO_LOG_LEVEL="5")  # the profiler's own chatter
sys.exit(subprocess.call([sys.executable, os.path.join(config["harness"], "op_profile.py"),
                          "--task", os.path.join(workspace, "model.py"),
                          "--device", config["device"]] + arguments, env=environment))
