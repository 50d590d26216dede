"""The host time of the synthesizer's kernel callers (synth_kernel*.py) in a task's candidate:
each caller's Python work for one call (its inputs' layout, the output's allocation, the bound
call's arguments) with the kernel itself a no-op, once with the layout worked out on every call
(the caller's memo of layouts cleared before each) and once as generated (once per layout). Where a
candidate runs many small kernels (an unrolled recurrence, say), this host time rather than the
GPU sets the pace, and torch.compile's generated callers are lean.

Then the aten ops one forward dispatches (views and allocations, library GEMM and convolution;
in all and by op), counted on the meta device, and what the evaluator's guards add to each: the
dispatch guard, each aten op through Python, around a candidate's checked and warm-up calls,
and the TimedGuard, the profiler's record of each op, around its timed calls (a baseline's calls
run under neither), so the ops times that cost is host time the candidate pays and eager does
not.

And the kernels one forward launches, the pipeline's copy kernel's among them with the bytes
those copies move (read and written): data a fused kernel could have read or written in place.

And what utils/kernels.py's binding costs a call of each kernel, with a call's own arguments,
into a no-op C function of as many 64-bit parameters (built here with the C compiler): through
ctypes' conversion of each argument, and through the entry's packed companion (NAME_packed,
every argument a word of one buffer), which the synthesizer's kernels define.

    python3 bench/wrapper_overhead.py [--tasks level3/010_gru_unrolled ...] [--shrink 8]
    # cpu only (the candidate is written with `optimize --stage compile --device cpu`, the
    # callers timed on tensors of the shrunk task's shapes); prints a table, writes
    # wrapper_overhead.json
"""
import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import timeit
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_spec = importlib.util.spec_from_file_location("bench_common", HERE / "common.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

DEFAULT_TASKS = ["level3/010_gru_unrolled", "level2/012_group_norm_silu",
                 "level3/002_transformer_encoder_block"]


def child(workspace: Path, task_path: str, shrink: int, calls: int) -> None:
    """Times the callers of the candidate in workspace; prints one JSON line per caller call."""
    sys.path.insert(0, str(ROOT / "harness"))
    import torch

    import common

    # Every bound kernel function a no-op that counts its calls: only the callers' own work is
    # timed. The copy kernel's calls also count the bytes it would move (read and written).
    launches = {}
    bound = {}  # kernel name: (parameter types, the arguments of its first call)

    def bind(name, *parameters):
        def call(*args):
            bound.setdefault(name, (parameters, args))
            count = launches.setdefault(name, {"calls": 0, "bytes": 0})
            count["calls"] += 1
            if name == "strided_copy":  # (source, target, at, element size, elements, ...)
                count["bytes"] += 2 * args[3] * args[4]
            return 0
        return call
    library = types.SimpleNamespace(bind=bind)
    stub = types.ModuleType("utils.kernels")
    stub.load = lambda: library
    sys.modules["utils"] = types.ModuleType("utils")
    sys.modules["utils.kernels"] = stub
    sys.path.insert(0, str(workspace))
    task = common.load_task(task_path)
    common.shrink_task(task, shrink)
    model_new = importlib.import_module("model_new")
    recorded, originals = [], {}
    # A pipeline's kernels each have a caller of their own; a one-kernel candidate is its caller.
    names = [f.stem for f in sorted(workspace.glob("synth_kernel*.py"))] or ["model_new"]
    for module in map(importlib.import_module, names):
        original = originals[module.__name__] = module.ModelNew.forward

        def recording(self, *args, _module=module, _original=original, **kwargs):
            recorded.append((_module, self, args, kwargs))  # kwargs: out, a slice of a cat
            return _original(self, *args, **kwargs)
        module.ModelNew.forward = recording
    torch.set_grad_enabled(False)
    model = model_new.ModelNew(*task.get_init_inputs())
    model(*task.get_inputs())
    for module, caller, args, kwargs in recorded:
        module.ModelNew.forward = originals[module.__name__]
        memo = getattr(caller, "_layouts", None)

        def cold():
            if memo is not None:
                memo.clear()
            caller(*args, **kwargs)
        row = {"kernel": module.__name__, "ops": (module.__doc__ or "").split(": ", 1)[-1][:60],
               "inputs": len(args), "kept": memo is not None}
        for name, call in (("every_call_us", cold),
                           ("as_generated_us", lambda: caller(*args, **kwargs))):
            call()
            row[name] = min(timeit.repeat(call, number=calls, repeat=3)) / calls * 1e6
        print(json.dumps(row), flush=True)
    for row in binding_costs(bound, calls):
        print(json.dumps(row), flush=True)
    launches.clear()
    forward = forward_ops(model, task)
    forward["launches"] = launches
    print(json.dumps({"forward": forward}), flush=True)


def binding_costs(bound: dict, calls: int) -> list[dict]:
    """Per kernel bound (not its _config setter): microseconds a call of its first call's
    arguments costs through the real binding, into a no-op of as many 64-bit parameters, with
    ctypes converting each argument and with a packed companion taking them in one buffer."""
    spec = importlib.util.spec_from_file_location(
        "real_kernels", ROOT / "harness" / "workspace" / "utils" / "kernels.py")
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    entries = [(name, parameters, args) for name, (parameters, args) in sorted(bound.items())
               if not name.endswith("_config")]
    source = "#include <stdint.h>\n"
    for k, (_, parameters, _) in enumerate(entries):
        words = ", ".join(f"int64_t a{i}" for i in range(len(parameters)))
        source += (f"int plain_{k}({words}) {{ return 0; }}\n"
                   f"int packed_{k}({words}) {{ return 0; }}\n"
                   f"int packed_{k}_packed(const int64_t* words) {{ return 0; }}\n")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "noop.c").write_text(source)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", f"{tmp}/libnoop.so",
                        f"{tmp}/noop.c"], check=True)
        library = kernels.KernelLibrary(f"{tmp}/libnoop.so")
        rows = []
        for k, (name, parameters, args) in enumerate(entries):
            row = {"binding": name, "arguments": len(parameters)}
            for side in ("plain", "packed"):
                call = library.bind(f"{side}_{k}", *parameters)
                row[f"{side}_us"] = min(timeit.repeat(lambda: call(*args), number=calls,
                                                      repeat=3)) / calls * 1e6
            rows.append(row)
    return rows


def forward_ops(model, task) -> dict:
    """The aten ops one forward dispatches, by the guard's kinds and ("by_name") by op, counted
    on the meta device (every op's dispatch, no op's work: shapes alone)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import guard

    class Counting(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops = {"allowed": 0, "library": 0, "compute": 0, "by_name": {}}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            packet = func.name().split(".", 1)[0]
            self.ops[guard.classify_packet(packet)] += 1
            self.ops["by_name"][packet] = self.ops["by_name"].get(packet, 0) + 1
            return func(*args, **(kwargs or {}))

    model = model.to("meta")
    inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    counting = Counting()
    with counting:
        model(*inputs)
    return counting.ops


def guard_cost_us(calls: int) -> dict[str, float]:
    """What each of the evaluator's guards adds to one aten op (views and an allocation of small
    CPU tensors, plain and inside the guard, per op): "dispatch", the dispatch guard of its
    checked and warm-up calls; "timed", the TimedGuard of its timed calls, taught by one call
    under the dispatch guard."""
    sys.path.insert(0, str(ROOT / "harness"))
    import contextlib

    import torch

    import guard

    x = torch.empty(4, 6, 12)

    def ops():
        for _ in range(100):  # four aten ops a round: select, split, empty, slice
            x.select(1, 3).chunk(3, 1)
            torch.empty(4, 4)[:, 1:]

    timed = guard.TimedGuard(guard.DispatchGuard())
    with timed.learning():
        ops()
    number = max(1, calls // 50)
    best = {}
    for name, inside in (("plain", contextlib.nullcontext), ("dispatch", guard.DispatchGuard),
                         ("timed", lambda: timed)):
        times = []
        for _ in range(5):
            with inside():
                times.append(timeit.timeit(ops, number=number))
        best[name] = min(times)
    if timed.guard.violations:
        raise RuntimeError(f"the timed guard found {timed.guard.violations[0]}")
    return {name: (best[name] - best["plain"]) / (number * 100 * 4) * 1e6
            for name in ("dispatch", "timed")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=DEFAULT_TASKS)
    parser.add_argument("--shrink", type=int, default=8)
    parser.add_argument("--calls", type=int, default=500, help="calls a timing (best of 3)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.shrink, args.calls)
        return
    tasks = bench.suite_tasks(ROOT / "tasks", ["level1", "level2", "level3"], args.tasks)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            name = f"{task.parent.name}/{task.stem}"
            workspace = Path(tmp) / task.stem
            made = subprocess.run(
                [bench.binary(), "optimize", str(task), "--device", "cpu", "--shrink",
                 str(args.shrink), "--stage", "compile", "--tune", "off", "--workspace",
                 str(workspace)], capture_output=True, text=True)
            if made.returncode != 0:
                print(f"{name}: no candidate ({made.stdout.strip().splitlines()[-1:]})")
                continue
            # A fresh process per task: the candidates' modules share names.
            timed = subprocess.run(
                [sys.executable, __file__, "--child", str(workspace), str(task), "--shrink",
                 str(args.shrink), "--calls", str(args.calls)], capture_output=True, text=True)
            if timed.returncode != 0:
                print(f"{name}: timing failed\n{timed.stderr[-2000:]}")
                continue
            lines = [json.loads(line) for line in timed.stdout.splitlines() if line.startswith("{")]
            rows = [line for line in lines if "kernel" in line]
            bindings = [line for line in lines if "binding" in line]
            forward = next((line["forward"] for line in lines if "forward" in line), None)
            results.append({"task": name, "calls": rows, "forward": forward, "bindings": bindings,
                            "every_call_us": sum(r["every_call_us"] for r in rows),
                            "as_generated_us": sum(r["as_generated_us"] for r in rows)})
    print(f"{'task':40} {'kernel':16} {'inputs':>6} {'every call us':>14} {'as generated us':>16}")
    for result in results:
        for row in result["calls"]:
            print(f"{result['task']:40} {row['kernel']:16} {row['inputs']:>6} "
                  f"{row['every_call_us']:>14.1f} {row['as_generated_us']:>16.1f}")
        print(f"{result['task']:40} {'one forward':16} {'':>6} "
              f"{result['every_call_us']:>14.1f} {result['as_generated_us']:>16.1f}")
    per_op = guard_cost_us(args.calls)
    print(f"\nthe dispatch guard adds {per_op['dispatch']:.2f} us to an aten op on this machine, "
          f"the timed calls' guard {per_op['timed']:.2f}")
    print(f"{'one forward':40} {'aten ops':>9} {'library':>8} {'guard us':>9} {'timed us':>9}")
    for result in results:
        forward = result["forward"]
        if forward:
            ops = forward["allowed"] + forward["library"] + forward["compute"]
            result["guard_us"] = ops * per_op["dispatch"]
            result["timed_guard_us"] = ops * per_op["timed"]
            print(f"{result['task']:40} {ops:>9} {forward['library']:>8} "
                  f"{result['guard_us']:>9.1f} {result['timed_guard_us']:>9.1f}")
            by_name = sorted(forward["by_name"].items(), key=lambda item: -item[1])
            print("    " + ", ".join(f"{name.removeprefix('aten::')} {count}"
                                    for name, count in by_name))
    print(f"\n{'one forward':40} {'kernel launches':>15} {'copies':>7} {'copied MB':>10}")
    for result in results:
        launches = (result["forward"] or {}).get("launches", {})
        copies = launches.get("strided_copy", {"calls": 0, "bytes": 0})
        total = sum(count["calls"] for count in launches.values())
        print(f"{result['task']:40} {total:>15} {copies['calls']:>7} "
              f"{copies['bytes'] / 1e6:>10.1f}")
    print(f"\n{'a call of the binding':40} {'kernel':22} {'arguments':>9} {'ctypes us':>10} "
          f"{'packed us':>10}")
    for result in results:
        for row in result["bindings"]:
            print(f"{result['task']:40} {row['binding']:22} {row['arguments']:>9} "
                  f"{row['plain_us']:>10.2f} {row['packed_us']:>10.2f}")
    out = bench.results_dir() / "wrapper_overhead.json"
    out.write_text(json.dumps({"shrink": args.shrink, "guard_us_an_op": per_op["dispatch"],
                               "timed_guard_us_an_op": per_op["timed"], "tasks": results},
                              indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
