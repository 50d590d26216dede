"""What the torch.compile baseline's first call costs inside the locked device's time, with and
without timing.warm_inductor() run before it (what timing.py does while it waits for its
release): each task in two fresh processes, each with an empty inductor and Triton cache, the
task's full-size inputs on the device, the first call of torch.compile(Model) timed.

    python3 bench/compile_warmup.py [--tasks level1/003_gelu level2/004_softmax_mask_sum ...]
    # cuda only; prints a table, writes compile_warmup.json
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_spec = importlib.util.spec_from_file_location("bench_common", HERE / "common.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

DEFAULT_TASKS = ["level1/003_gelu", "level1/018_softmax", "level2/004_softmax_mask_sum",
                 "level3/002_transformer_encoder_block"]


def child(task_path: str, warm: bool) -> None:
    """One measurement, printed as JSON: the warm-up (when asked) and the first call."""
    sys.path.insert(0, str(ROOT / "harness"))
    import torch

    import common
    import timing

    torch.set_grad_enabled(False)
    torch.empty(1, device="cuda")
    warmed, warm_s = None, 0.0
    if warm:
        mark = time.perf_counter()
        warmed = timing.warm_inductor()
        warm_s = time.perf_counter() - mark
    task = common.load_task(task_path)
    model = task.Model(*task.get_init_inputs()).to("cuda")
    inputs = [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    compiled = common.torch_compile(model, "cuda")
    torch.cuda.synchronize()
    mark = time.perf_counter()
    compiled(*inputs)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - mark
    print(json.dumps({"warmed": warmed, "warm_s": warm_s, "first_call_s": first_s}))


def measure(task_path: Path, warm: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{cache}/inductor",
                   TRITON_CACHE_DIR=f"{cache}/triton")
        done = subprocess.run([sys.executable, __file__, "--child", str(task_path)]
                              + (["--warm"] if warm else []), env=env, capture_output=True,
                              text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{task_path}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.warm)
        return
    rows, results = [], {}
    for name in args.tasks:
        path = ROOT / "tasks" / f"{name}.py"
        cold, warm = measure(path, False), measure(path, True)
        results[name] = {"cold": cold, "warm": warm}
        rows.append([name, f"{cold['first_call_s']:.2f}", f"{warm['warm_s']:.2f}",
                     f"{warm['first_call_s']:.2f}", str(warm["warmed"])])
    bench.print_table(["task", "first call, cold s", "warm-up s (before the lock)",
                       "first call after it s", "warmed"], rows)
    print(f"wrote {bench.write_json('compile_warmup.json', {'tasks': results})}")


if __name__ == "__main__":
    main()
