"""One agent episode end to end on a device, with a scripted model in place of an LLM: the
scripted server (tests/agent/scripted_server.py) replies as vLLM would with the calls a model
would make (read the task, write the example's kernel and model_new.py, compile, verify,
profile, stop), and `cuda-agent optimize --policy llm` runs them through its tools and the
evaluator. It shows the loop, the sandboxed Bash, the in-episode evaluations and the final
reward working on a GPU, and how long each part takes; it measures no model.

  python3 bench/agent_episode.py --device cuda      # prints the trajectory, writes JSON to $OUT
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agent"))
from scripted_server import ScriptedServer  # noqa: E402

EXAMPLE = ROOT / "examples" / "scale_bias_relu"


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--binary", default=os.environ.get("CUDA_AGENT_BIN",
                                                           str(ROOT / "build" / "cuda-agent")))
    args = parser.parse_args()
    kernel_dir = "kernels_cuda" if args.device == "cuda" else "kernels_cpu"
    source = next((EXAMPLE / kernel_dir).iterdir())
    script = [
        {"tool_calls": [call("Read", file_path="model.py"), call("Read", file_path="SKILL.md")]},
        {"tool_calls": [call("Write", file_path=f"kernels/{source.name}", content=source.read_text()),
                        call("Write", file_path="model_new.py",
                             content=(EXAMPLE / "model_new.py").read_text())]},
        {"tool_calls": [call("Bash", command="python utils/compile.py", timeout=600000)]},
        {"tool_calls": [call("Bash", command="python utils/verify.py", timeout=600000)]},
        {"tool_calls": [call("Bash", command="python utils/profile.py", timeout=600000)]},
        {"content": "Correct, and profiled; done."},
    ]
    out = Path(os.environ.get("OUT", tempfile.mkdtemp()))
    home = Path(tempfile.mkdtemp())
    env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache")}
    began = time.time()
    with ScriptedServer(script) as server:
        result = subprocess.run(
            [args.binary, "--store", str(home / "store.sqlite"), "optimize",
             str(EXAMPLE / "scale_bias_relu.py"), "--device", args.device, "--policy", "llm",
             "--endpoint", server.url, "--model", "scripted", "--json",
             "--workspace", str(home / "episode")],
            capture_output=True, text=True, env=env)
    wall = time.time() - began
    print(result.stderr[-4000:])
    if not result.stdout.strip().startswith("{"):
        print(result.stdout)
        return 2
    record = json.loads(result.stdout)
    shown = subprocess.run([args.binary, "--store", str(home / "store.sqlite"), "show",
                            record["run"], "--json"], capture_output=True, text=True, env=env)
    trajectory = json.loads(shown.stdout)
    print(subprocess.run([args.binary, "--store", str(home / "store.sqlite"), "show",
                          record["run"]], capture_output=True, text=True, env=env).stdout[-6000:])
    rows = [("turn", "tool", "seconds", "error")]
    for t in trajectory["turns"]:
        for c in t["tool_calls"]:
            rows.append((str(t["turn"]), c["name"], f"{c['seconds']:.1f}", str(c["error"])))
    for r in rows:
        print(f"{r[0]:>5}  {r[1]:<12} {r[2]:>8}  {r[3]}")
    summary = {"device": args.device, "device_name": record.get("device_name"),
               "wall_s": round(wall, 1), "reward": record.get("reward"),
               "outcome": record.get("outcome"), "ending": trajectory["ending"],
               "eager_us": record.get("eager_us"), "compile_us": record.get("compile_us"),
               "candidate_us": record.get("candidate_us"),
               "in_episode": [{"stage": e.get("stage"), "outcome": e.get("outcome"),
                               "reward": e.get("reward")} for e in trajectory["evaluations"]],
               "tool_seconds": {f"{t['turn']}:{c['name']}": round(c["seconds"], 2)
                                for t in trajectory["turns"] for c in t["tool_calls"]}}
    print(json.dumps(summary, indent=2))
    out.mkdir(parents=True, exist_ok=True)
    (out / "agent_episode.json").write_text(json.dumps({"summary": summary,
                                                         "trajectory": trajectory}, indent=2))
    return 0 if record.get("reward", -1) >= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
