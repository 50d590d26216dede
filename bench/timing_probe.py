"""Two questions about the evaluator's full-size path, on one task (level1/002_leaky_relu by
default), each answered in a process of its own:

1. What an input set costs on its way to the host, as prepare.py wrote every set before the
   sets were drawn again in each process (and still writes them for a task whose get_inputs()
   does not repeat itself): drawing it on the device, then the harness's staged copy to the
   host (common.host_copy) in its two halves (device to the pinned buffer, pinned buffer to the
   new host tensor), a plain .cpu() for comparison, and the staged copy again into host memory
   already touched; in a process as the harness runs it (OMP_WAIT_POLICY=PASSIVE) and with
   torch's transparent huge pages (THP_MEM_ALLOC_ENABLE=1).
2. Whether the inputs timing.py makes for each call change the times: eager, torch.compile and
   the synthesizer's candidate timed in one process with CUDA events, the L2 flushed before each
   call, the three taking turns call by call, on (a) the same input every call, (b) a fresh
   clone every call, (c) a fresh clone scaled element by element (timing.py's plan).

Prints a table per question and writes timing_probe.json.

    source bench/device_env.sh && python3 bench/timing_probe.py
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, build_candidate, results_dir

HARNESS = ROOT / "harness"


def load_task(path: str):
    spec = importlib.util.spec_from_file_location("task_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw_child(task_path: str, sets: int) -> dict:
    """Question 1, in this process: seconds per GiB of each step, summed over the sets."""
    import torch

    sys.path.insert(0, str(HARNESS))
    sys.modules.pop("common", None)  # bench/common.py, imported at the top, has the same name
    import common  # the harness's own copy path

    task = load_task(task_path)
    totals = {"draw": 0.0, "to_stage": 0.0, "stage_to_host": 0.0, "staged_total": 0.0,
              "plain_cpu": 0.0, "staged_into_touched": 0.0}
    gib = 0.0
    stage = torch.empty(common.STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
    for k in range(sets):
        torch.manual_seed(k)
        begin = time.perf_counter()
        with torch.device("cuda"):
            inputs = [x for x in task.get_inputs() if isinstance(x, torch.Tensor)]
        torch.cuda.synchronize()
        totals["draw"] += time.perf_counter() - begin
        for tensor in inputs:
            gib += tensor.numel() * tensor.element_size() / (1 << 30)
            source = tensor.contiguous().reshape(-1).view(torch.uint8)
            begin = time.perf_counter()
            result = torch.empty(tensor.shape, dtype=tensor.dtype)
            target = result.reshape(-1).view(torch.uint8)
            size, chunk = source.numel(), stage.numel()
            for start in range(0, size, chunk):
                length = min(chunk, size - start)
                mark = time.perf_counter()
                stage[:length].copy_(source[start:start + length])
                middle = time.perf_counter()
                target[start:start + length].copy_(stage[:length])
                totals["to_stage"] += middle - mark
                totals["stage_to_host"] += time.perf_counter() - middle
            totals["staged_total"] += time.perf_counter() - begin
            begin = time.perf_counter()
            for start in range(0, size, chunk):  # into the memory just touched
                length = min(chunk, size - start)
                stage[:length].copy_(source[start:start + length])
                target[start:start + length].copy_(stage[:length])
            totals["staged_into_touched"] += time.perf_counter() - begin
            del result, target
            begin = time.perf_counter()
            plain = tensor.cpu()
            totals["plain_cpu"] += time.perf_counter() - begin
            del plain
        del inputs
    return {"gib": round(gib, 3),
            "s_per_gib": {name: round(value / gib, 4) for name, value in totals.items()}}


def timing_child(task_path: str, workspace: str, lib: str, calls: int) -> dict:
    """Question 2, in this process: median microseconds per implementation and input regime."""
    import torch

    task = load_task(task_path)
    os.environ["CUDA_AGENT_KERNEL_LIB"] = lib
    sys.path.insert(0, workspace)
    import model_new  # noqa: E402

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    init = task.get_init_inputs()
    reference = task.Model(*init).cuda().eval()
    candidate = model_new.ModelNew(*init)
    if candidate.state_dict().keys() == reference.state_dict().keys():
        candidate.load_state_dict(reference.state_dict())
    candidate = candidate.cuda().eval()
    compiled = torch.compile(reference)
    with torch.device("cuda"):
        base = [x for x in task.get_inputs()]
    impls = {"eager": reference, "compile": compiled, "candidate": candidate}
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")  # 256 MiB

    def fixed(i):
        return base

    def clone(i):
        return [x.clone() for x in base]

    def jitter(i):
        made = []
        for x in base:
            x = x.clone()
            factors = torch.rand(x.shape, device=x.device)
            x.mul_(factors.mul_(-0.125).add_(1).mul_(0.75))
            made.append(x)
        return made

    regimes = {"same input": fixed, "fresh clone": clone, "fresh, scaled (timing.py)": jitter}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    results = {}
    with torch.no_grad():
        for impl in impls.values():  # compile and warm every implementation first
            for _ in range(3):
                impl(*base)
        torch.cuda.synchronize()
        for regime, make in regimes.items():
            times = {name: [] for name in impls}
            names = list(impls)
            for i in range(calls):
                for name in names[i % 3:] + names[:i % 3]:  # each goes first a third of the time
                    inputs = make(i)
                    flush.fill_(i)
                    torch.cuda.synchronize()
                    start.record()
                    out = impls[name](*inputs)
                    end.record()
                    torch.cuda.synchronize()
                    times[name].append(start.elapsed_time(end) * 1000)
                    del out, inputs
            results[regime] = {name: statistics.median(t) for name, t in times.items()}
    return results


def child(args: list[str], env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], text=True, capture_output=True,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--draw-child":
        print(json.dumps(draw_child(sys.argv[2], int(sys.argv[3]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--timing-child":
        print(json.dumps(timing_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default=str(ROOT / "tasks" / "level1" / "002_leaky_relu.py"))
    parser.add_argument("--sets", type=int, default=3, help="input sets drawn (question 1)")
    parser.add_argument("--calls", type=int, default=30, help="timed calls a regime (question 2)")
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    task = str(Path(args.task).resolve())

    draws = {}
    for label, env in (("as the harness runs (OMP passive)", {"OMP_WAIT_POLICY": "PASSIVE"}),
                       ("THP_MEM_ALLOC_ENABLE=1", {"OMP_WAIT_POLICY": "PASSIVE",
                                                   "THP_MEM_ALLOC_ENABLE": "1"}),
                       ("OMP default", {})):
        draws[label] = child(["--draw-child", task, str(args.sets)], env)
    steps = list(next(iter(draws.values()))["s_per_gib"])
    print(f"\nQuestion 1: seconds per GiB, {args.sets} input sets of {Path(task).stem}\n")
    print(f"{'process':36} " + " ".join(f"{s:>19}" for s in steps))
    for label, d in draws.items():
        print(f"{label:36} " + " ".join(f"{d['s_per_gib'][s]:19.3f}" for s in steps))

    work = Path(tempfile.mkdtemp(prefix="timing-probe-"))
    workspace, lib = build_candidate(Path(task), work, args.arch)
    timed = child(["--timing-child", task, str(workspace), str(lib), str(args.calls)])
    print(f"\nQuestion 2: median us of {args.calls} calls, L2 flushed, implementations in turn\n")
    print(f"{'inputs':28} {'eager':>9} {'compile':>9} {'candidate':>9}")
    for regime, row in timed.items():
        print(f"{regime:28} {row['eager']:9.1f} {row['compile']:9.1f} {row['candidate']:9.1f}")
    out = results_dir() / "timing_probe.json"
    out.write_text(json.dumps({"task": task, "draw": draws, "timing": timed}, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
