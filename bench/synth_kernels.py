"""Times the synthesizer's kernels beside eager and torch.compile, one process per task, at the
task's size: `cuda-agent optimize --stage compile` writes model_new.py and kernels/, nvcc builds
them, and a child process checks the candidate's outputs against eager on random inputs, then
times eager, torch.compile and the candidate with CUDA events, the L2 cache flushed before each
call, all three in full fp32 as the evaluator pins them (cuDNN's own default is TF32; --tf32 lets
the candidate's GEMMs and convolutions take it, as the evaluator's flag does). Quicker than
synth_suite.py (no sandbox, no secret seeds, one input set), so it is the script for working on
the kernels; the figures that count are synth_suite.py's, through the evaluator. Writes
synth_kernels.json; each task's row is kept in synth-kernels-work so that a run cut short resumes
(--fresh starts over).

Several tasks are prepared at once (--jobs: capture, code, nvcc) and several children run at once
(--gpu-jobs: start-up, inputs, torch.compile's compile), but a child checks and times only while
it holds a lock on the GPU that the run's children share, so one task is timed at a time and the
GPU never waits on a compile.

With --sanitize TOOL nothing is timed: each task's kernels are built with line information and
every launch configuration is run once and checked under compute-sanitizer's TOOL (memcheck for
out-of-bounds and misaligned accesses, racecheck for shared-memory races, initcheck, synccheck),
at --shrink's size (16 by default there: the sanitizer slows each kernel a hundredfold); the
table says which tasks it found errors in, and sanitize_kernels.json keeps its first reports.

    source bench/device_env.sh && python3 bench/synth_kernels.py [--only level1/011_sum_dim ...]
    python3 bench/synth_kernels.py --sanitize memcheck --only level1/017_cumsum ...
"""
import argparse
import concurrent.futures
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import ROOT, binary, geomean, results_dir, suite_tasks

LIB_ENV = "CUDA_AGENT_KERNEL_LIB"
GPU_LOCK_ENV = "SYNTH_KERNELS_GPU_LOCK"


def kernel_profile(fn, inputs: list, calls: int = 3) -> list:
    """The device kernels one call of fn launches, by name, most time first: [name, launches a
    call, microseconds a call] (torch.profiler over a few calls, after they were timed)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.device_time_total > 0:
            launches, us = kernels.get(event.name, (0, 0.0))
            kernels[event.name] = (launches + 1, us + event.device_time_total)
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])
    return [[name, round(n / calls, 2), round(us / calls, 1)] for name, (n, us) in ranked]


def child(task: str, workspace: str, lib: str, reps: int, configs: list, shrink: int,
          profiled: bool = False, tf32: bool = False) -> dict:
    """Runs in its own process: correctness and times of one task's candidate in each of its
    launch configurations (reps -1: the checks alone). Start-up, the inputs, the reference's
    outputs and torch.compile's compile happen before the child takes its turn on the GPU; the
    checks and the timed calls during it. The task's sizes are shrunk as the candidate's were
    (its parameters have the shapes captured at that size). With profiled, the row also lists the
    kernels one call of torch.compile's code and of the candidate (default configuration) run,
    and the candidate's time with the evaluator's dispatch guard around each call and with its
    timed calls' guard (guard.TimedGuard).
    Eager and torch.compile run in full fp32, as the evaluator runs them; the candidate too, unless
    tf32."""
    import torch

    def load(name: str, path: Path):
        spec = importlib.util.spec_from_file_location(name, path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded

    # The harness's common.py (this folder's common.py holds the name): its shrink_task; and its
    # watch.py: the precision flags as the evaluator pins them.
    sys.path.insert(0, str(ROOT / "harness"))
    harness = load("harness_common", ROOT / "harness" / "common.py")
    watch = load("harness_watch", ROOT / "harness" / "watch.py")
    watch.pin_precision("fp32")
    module = load("task_module", Path(task))
    sizes = harness.shrink_task(module, shrink)
    os.environ[LIB_ENV] = lib
    sys.path.insert(0, workspace)
    import model_new  # noqa: E402 (the workspace is on the path only now)

    # The kernels' configuration setters (<entry>_config) that model_new.py binds, or a
    # pipeline's kernel modules (synth_kernel<k>.py) do.
    modules = [model_new] + [m for name, m in sorted(sys.modules.items())
                             if name.startswith("synth_kernel")]
    setters = [getattr(m, name) for m in modules for name in dir(m)
               if name.endswith("_config") and callable(getattr(m, name))]

    def use(config: int) -> None:
        for setter in setters:
            setter(config)

    torch.manual_seed(0)
    init = module.get_init_inputs()
    reference = module.Model(*init).cuda().eval()
    candidate = model_new.ModelNew(*init)
    own, theirs = candidate.state_dict(), reference.state_dict()
    if own.keys() == theirs.keys():
        candidate.load_state_dict(theirs)
    candidate = candidate.cuda().eval()
    with torch.device("cuda"):  # the task's inputs made on the GPU: seconds less per task
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]

    def as_list(value):
        return list(value) if isinstance(value, (tuple, list)) else [value]

    def candidate_call(*args):
        watch.pin_precision("tf32" if tf32 else "fp32")
        try:
            return candidate(*args)
        finally:
            watch.pin_precision("fp32")

    def check(expected) -> tuple:
        got = as_list(candidate_call(*inputs))
        torch.cuda.synchronize()
        worst, correct = 0.0, len(expected) == len(got)
        for e, g in zip(expected, got):
            same = e.shape == g.shape and e.dtype == g.dtype
            if same and e.is_floating_point():
                diff = (e.float() - g.float()).abs()
                worst = max(worst, float(diff.max()))
                same = bool(torch.allclose(g.float(), e.float(), atol=1e-2, rtol=1e-2))
            elif same:
                same = bool(torch.equal(e, g))
            correct = correct and same
        return correct, worst

    def checked_and_timed(row: dict, expected: list, compiled) -> dict:
        # Each configuration is checked; one that is wrong is not timed.
        checked = {}
        for config in configs or [{"id": -1, "label": "default"}]:
            use(config["id"])
            checked[config["label"]] = (config["id"], *check(expected))
        default = next(iter(checked.values()))
        row.update(correct=default[1], max_abs_diff=default[2],
                   wrong_configs=[label for label, c in checked.items() if not c[1]])
        del expected[:]
        if reps < 0:  # under the sanitizer: the checks alone
            torch.cuda.synchronize()
            return row
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

        def median_ms(fn) -> float:
            for _ in range(5):
                fn(*inputs)
            times = []
            for _ in range(reps):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return statistics.median(times)

        # Interleaved rounds, so that a drift of the clock touches all alike.
        timed = [label for label, c in checked.items() if c[1]]
        rounds = {"eager_ms": [], "compile_ms": [], **{label: [] for label in timed}}
        for _ in range(3):
            rounds["eager_ms"].append(median_ms(reference))
            rounds["compile_ms"].append(median_ms(compiled))
            for label in timed:
                use(checked[label][0])
                rounds[label].append(median_ms(candidate_call))
        best = {k: min(v) for k, v in rounds.items()}
        row.update(eager_ms=best.pop("eager_ms"), compile_ms=best.pop("compile_ms"))
        row["config_ms"] = best
        if best:
            first = next(iter(checked))
            row["default_ms"] = best.get(first)
            row["config"] = min(best, key=best.get)
            row["candidate_ms"] = best[row["config"]]
        if profiled and timed:
            use(checked[timed[0]][0])
            # Every aten op of the call through the dispatch guard (as the evaluator's checked
            # and warm-up calls run), and under the TimedGuard the warm-up taught (as its timed
            # calls run).
            guard = load("harness_guard", ROOT / "harness" / "guard.py")

            def guarded_call(*args):
                with guard.DispatchGuard():
                    return candidate_call(*args)
            row["guarded_ms"] = median_ms(guarded_call)
            timed_guard = guard.TimedGuard(guard.DispatchGuard())
            with timed_guard.learning():
                candidate_call(*inputs)

            def timed_guard_call(*args):
                with timed_guard:
                    return candidate_call(*args)
            row["timed_guard_ms"] = median_ms(timed_guard_call)
            if timed_guard.guard.violations:
                raise RuntimeError(f"the timed guard found {timed_guard.guard.violations[0]}")
            row["profile"] = {"compile": kernel_profile(compiled, inputs),
                              "candidate": kernel_profile(candidate_call, inputs)}
        return row

    # A task that names no SCALABLE_SIZES runs at full size whatever the shrink.
    row = {"full_size": shrink > 1 and not sizes}
    with torch.no_grad():
        expected = as_list(reference(*inputs))
        compiled = None
        if reps >= 0:
            compiled = torch.compile(reference)
            compiled(*inputs)  # the compile, while another child may be timed
        torch.cuda.synchronize()
        # The run's children share a lock on the GPU ($SYNTH_KERNELS_GPU_LOCK; none unset).
        with harness.gpu_lock(os.environ.get(GPU_LOCK_ENV)):
            return checked_and_timed(row, expected, compiled)


def prepare(task: Path, args: argparse.Namespace, work: Path) -> dict:
    """Writes and builds the candidate (several tasks at once, no GPU). The row so far: "lib"
    set, or an outcome."""
    level = task.parent.name
    row = {"id": f"{level}/{task.stem}", "level": level, "shrink": args.shrink}
    workspace = work / "episodes" / f"{level}-{task.stem}"
    shutil.rmtree(workspace, ignore_errors=True)
    made = subprocess.run([binary(), "optimize", str(task), "--device", "cuda", "--shrink",
                           str(args.shrink), "--workspace", str(workspace), "--stage", "compile",
                           "--json"],
                          text=True, capture_output=True)
    if made.returncode != 0:
        return dict(row, outcome="no_candidate", reason=" ".join(made.stderr.split())[-300:])
    configs = json.loads(made.stdout).get("configs", [])
    row["configs"] = configs if args.configs else configs[:1]
    # A pipeline offers its default alone: --config-ids sets each of its kernels so in turn.
    row["configs"] += [{"id": i, "label": f"config {i}"} for i in args.config_ids
                       if i not in [c["id"] for c in row["configs"]]]
    lib = workspace / "build" / "libkernels.so"
    lib.parent.mkdir(exist_ok=True)
    sources = sorted(str(p) for p in (workspace / "kernels").glob("*.cu"))
    began = time.perf_counter()
    line_info = ["-lineinfo"] if args.sanitize else []  # the sanitizer's reports name lines
    built = subprocess.run(["nvcc", "-O3", "-std=c++17", f"-arch={args.arch}", "-shared",
                            "-Xcompiler", "-fPIC", *line_info, "-o", str(lib), *sources],
                           text=True, capture_output=True)
    row["nvcc_s"] = round(time.perf_counter() - began, 1)
    if built.returncode != 0:
        return dict(row, outcome="compile_error", reason=built.stderr[-300:])
    row.update(workspace=str(workspace), lib=str(lib))
    return row


SANITIZER_FOUND = 86  # compute-sanitizer's exit status when it reported an error


class SanitizerFound(RuntimeError):
    """compute-sanitizer reported errors; the message names the first."""


def run_child(row: dict, reps: int, timeout: int, sanitize: str = "", lock: str = "",
              profiled: bool = False, tf32: bool = False) -> dict:
    """The child's row (reps -1: the checks alone). With sanitize, the child runs under that
    compute-sanitizer tool, and errors it reports are a RuntimeError naming the first. With lock,
    the child checks and times only while it holds that file's lock."""
    workspace = Path(row["workspace"])
    env = dict(os.environ)
    # Several children compile at once: inductor's compile workers would oversubscribe the CPUs.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "4")
    if lock:
        env[GPU_LOCK_ENV] = lock
    log = workspace / "sanitizer.log"
    prefix = (["compute-sanitizer", "--tool", sanitize, "--error-exitcode",
               str(SANITIZER_FOUND), "--print-limit", "10", "--log-file", str(log)]
              if sanitize else [])
    done = subprocess.run([*prefix, sys.executable, __file__, "--child",
                           str(workspace / "model.py"), str(workspace), row["lib"], str(reps),
                           json.dumps(row["configs"]), str(row["shrink"]),
                           *(["--profile"] if profiled else []), *(["--tf32"] if tf32 else [])],
                          text=True, capture_output=True, timeout=timeout, env=env)
    if sanitize and done.returncode == SANITIZER_FOUND:
        report = log.read_text(errors="replace") if log.exists() else ""
        found = [line.removeprefix("========= ").strip() for line in report.splitlines()
                 if line.startswith("=========") and line.strip("= ")
                 and "COMPUTE-SANITIZER" not in line]
        raise SanitizerFound(f"{sanitize}: " + " | ".join(found[:6]))
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        error = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise RuntimeError(error[-1] if error else f"exit status {done.returncode}")
    return json.loads(lines[-1])


def measure(row: dict, args: argparse.Namespace, work: Path, lock: str) -> dict:
    """Times a prepared candidate (timed one task at a time: lock) and keeps its row."""
    if "lib" in row:
        try:
            row.update(run_child(row, -1 if args.sanitize else args.reps, args.task_timeout,
                                 args.sanitize, "" if args.sanitize else lock, args.profile,
                                 args.tf32))
        except subprocess.TimeoutExpired:
            return dict(row, outcome="timeout", reason=f"past {args.task_timeout} s")  # not kept
        except SanitizerFound as error:
            row.update(outcome="sanitizer", reason=str(error)[-600:])
        except RuntimeError as error:
            row.update(outcome="error", reason=str(error)[-400:])
        else:
            # Every configuration must be right: the tuner may choose any of them.
            wrong = row.get("wrong_configs") or []
            row["outcome"] = "pass" if row["correct"] and not wrong else "mismatch"
            if wrong:
                row["reason"] = "wrong in " + ", ".join(wrong)
            if "candidate_ms" in row:
                row["vs_eager"] = row["eager_ms"] / row["candidate_ms"]
                row["vs_compile"] = row["compile_ms"] / row["candidate_ms"]
        del row["lib"], row["workspace"]
    (work / f"{row['level']}-{row['id'].split('/')[1]}.json").write_text(json.dumps(row) + "\n")
    return row


def write_summary(out: Path, rows: list, sanitize: str = "") -> dict:
    if sanitize:
        summary = {"tool": sanitize, "tasks": len(rows),
                   **{outcome: sum(1 for r in rows if r.get("outcome") == outcome)
                      for outcome in ("pass", "sanitizer", "mismatch", "error")}}
        (out / "sanitize_kernels.json").write_text(json.dumps({"summary": summary, "rows": rows},
                                                              indent=1) + "\n")
        return summary
    measured = [r for r in rows if r.get("outcome") == "pass"]
    summary = {
        "tasks": len(rows),
        "candidates": sum(1 for r in rows if r.get("outcome") != "no_candidate"),
        "correct": len(measured),
        "faster_than_compile": sum(1 for r in measured if r["vs_compile"] > 1.0),
        "geomean_vs_compile": geomean([r["vs_compile"] for r in measured]),
        "geomean_vs_eager": geomean([r["vs_eager"] for r in measured]),
    }
    (out / "synth_kernels.json").write_text(json.dumps({"summary": summary, "rows": rows},
                                                       indent=1) + "\n")
    return summary


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        task, workspace, lib, reps, configs, shrink = sys.argv[2:8]
        print(json.dumps(child(task, workspace, lib, int(reps), json.loads(configs),
                               int(shrink), "--profile" in sys.argv[8:],
                               "--tf32" in sys.argv[8:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[],
                        help="level/name ids (prepared in this order, timed as each is ready)")
    parser.add_argument("--suite", type=Path, default=ROOT / "tasks",
                        help="a folder of level folders of tasks (bench/walk_tasks: tasks that "
                             "take each row walk)")
    parser.add_argument("--levels", nargs="*", default=["level1", "level2", "level3"])
    parser.add_argument("--shrink", type=int, help="default 1; with --sanitize 16")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--task-timeout", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=8, help="tasks prepared at once")
    parser.add_argument("--gpu-jobs", type=int, default=3,
                        help="children at once: each starts, makes its inputs and compiles "
                             "beside the others, and is timed alone")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--configs", action="store_true",
                        help="time every launch configuration the kernels take (what the tuner "
                             "tries), the fastest being the candidate's time")
    parser.add_argument("--config-ids", type=int, nargs="*", default=[],
                        help="configuration ids to time besides the default, each set on every "
                             "kernel of the candidate (a pipeline's kernels offer no "
                             "configurations of the candidate's own)")
    parser.add_argument("--sanitize", choices=["memcheck", "racecheck", "initcheck", "synccheck"],
                        help="check every configuration once under this compute-sanitizer tool "
                             "instead of timing")
    parser.add_argument("--tf32", action="store_true",
                        help="the candidate's fp32 GEMMs and convolutions in TF32 (eager and "
                             "torch.compile stay in full fp32, as in the evaluator)")
    parser.add_argument("--profile", action="store_true",
                        help="after the timing, list the kernels one call of torch.compile's code "
                             "and of the candidate run (torch.profiler): names, launches, us")
    args = parser.parse_args()
    if args.shrink is None:
        args.shrink = 16 if args.sanitize else 1
    if args.sanitize:
        args.configs = True  # every configuration is run under the tool

    out = results_dir()
    work = out / (f"sanitize-{args.sanitize}-work" if args.sanitize else "synth-kernels-work")
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    tasks = suite_tasks(args.suite, args.levels, args.only)
    kept = {t: work / f"{t.parent.name}-{t.stem}.json" for t in tasks}
    todo = [t for t in tasks if not kept[t].exists()]
    print(f"preparing {len(todo)} task(s), {args.jobs} at a time, {args.gpu_jobs} on the GPU at "
          "a time; each timed alone once it is ready", flush=True)
    if args.sanitize:
        print(f"{'task':48} {'outcome':12} {args.sanitize}'s first reports", flush=True)
    else:
        print(f"{'task':48} {'outcome':12} {'eager ms':>9} {'compile ms':>10} {'ours ms':>8} "
              f"{'vs eager':>8} {'vs compile':>10}  configuration", flush=True)
    rows = []
    order = {f"{t.parent.name}/{t.stem}": k for k, t in enumerate(tasks)}
    lock = str(work / "gpu.lock")
    children = threading.BoundedSemaphore(max(1, args.gpu_jobs))

    def prepared_and_measured(task: Path) -> dict:
        row = prepare(task, args, work)
        with children:  # the GPU's memory holds a few tasks' inputs at a time
            return measure(row, args, work, lock)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = [pool.submit(prepared_and_measured, t) for t in todo]
        kept_rows = (json.loads(kept[t].read_text()) for t in tasks if t not in todo)
        # Each task is timed as soon as it is ready, so that the GPU does not wait on one slow
        # preparation while others are ready; the JSON keeps the suite's order.
        fresh_rows = (f.result() for f in concurrent.futures.as_completed(done))
        for row in itertools.chain(kept_rows, fresh_rows):
            rows.append(row)
            rows.sort(key=lambda r: order[r["id"]])
            if row.get("full_size"):
                print(f"{row['id']}: ran at full size, not 1/{args.shrink}: the task names no "
                      "SCALABLE_SIZES", flush=True)
            if "vs_compile" in row:
                print(f"{row['id']:48} {row['outcome']:12} {row['eager_ms']:9.3f} "
                      f"{row['compile_ms']:10.3f} {row['candidate_ms']:8.3f} "
                      f"{row['vs_eager']:8.2f} {row['vs_compile']:10.2f}  {row['config']}",
                      flush=True)
            else:
                print(f"{row['id']:48} {row['outcome']:12} {row.get('reason', '')[:80]}",
                      flush=True)
            if "guarded_ms" in row:
                print(f"    candidate {row['guarded_ms']:9.3f} ms under the dispatch guard, "
                      f"{row['timed_guard_ms']:.3f} under the timed calls' guard", flush=True)
            for side, kernels in row.get("profile", {}).items():
                for name, launches, us in kernels[:8]:
                    print(f"    {side:9} {us:9.1f} us {launches:5g}x  {name[:110]}", flush=True)
            # after every task: a run cut short still leaves its table
            write_summary(out, rows, args.sanitize)
    print(json.dumps(write_summary(out, rows, args.sanitize)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
