"""Times one implementation of a task: eager Model, torch.compile(Model) or the candidate's
ModelNew (trusted for eager and compile; untrusted for the candidate).

Every implementation goes through the same steps, so that the evaluator's host clock sees the
same overhead around each: load, warm up on the profile sets, announce readiness and wait for
the secret of the timed calls (the evaluator starts its clock when it writes it), then run the
timed calls on fresh inputs derived from it and write their times, fingerprints and some outputs
for check.py --timed to recompute."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import contextlib
import math
import sys
import time
from types import ModuleType
from typing import Any, Callable

import torch

import common
import input_sets
from guard import TimedGuard
from watch import Watch

# Taken before any candidate code is imported: a patch of the module attributes later does not
# reach the timed region (T4). The watch reports such patches as well.
_perf_ns = time.perf_counter_ns
_fill = torch._C.TensorBase.fill_
if torch.cuda.is_available():
    _cuda_sync = torch._C._cuda_synchronize
    _record = torch._C._CudaEventBase.record
    _event_sync = torch._C._CudaEventBase.synchronize
    _elapsed_ms = torch._C._CudaEventBase.elapsed_time


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--impl", required=True, choices=["eager", "compile", "candidate"])
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--workspace", help="folder holding model_new.py (candidate only)")
    parser.add_argument("--kernel-lib", help="the compiled kernel library (candidate only)")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True,
                        help="inputs.json from prepare.py: the profile sets are drawn from it")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=10,
                        help="untimed calls first (default %(default)s)")
    parser.add_argument("--iters", type=int, default=50,
                        help="timed calls (default %(default)s)")
    parser.add_argument("--flush-mb", type=float, default=256,
                        help="MiB overwritten before each timed call to evict the L2; 0 skips "
                             "it, on cpu only (default %(default)s)")
    parser.add_argument("--save-calls", type=int, default=2,
                        help="timed calls whose outputs are kept in full (default %(default)s)")
    parser.add_argument("--out", required=True,
                        help="where the timed calls' fingerprints and kept outputs are written")
    common.add_precision_argument(parser)
    return parser


class Implementation:
    """forward(inputs) -> outputs, ending in a device synchronize, called inside a guard (for
    the candidate: its warm-up calls inside the dispatch guard, its timed calls inside the
    TimedGuard the warm-up taught, each entered before the clock starts and left after it
    stops, so that its push and pop are the harness's time, not the candidate's; a no-op for
    eager and compile); after(inputs, outputs) the checks that follow each call outside the
    timed region. Eager and compile run the same checks (and ignore what they find), so the
    overhead around their calls is the candidate's."""

    def __init__(self, forward: Callable[[list], list], after: Callable[[list, list], None],
                 watch: Watch, guard: TimedGuard | None = None) -> None:
        self.forward, self.after, self.watch = forward, after, watch
        self.warmup_guard = guard.learning if guard is not None else contextlib.nullcontext
        self.timed_guard = (lambda: guard) if guard is not None else contextlib.nullcontext


def build(args: Any, init: dict, task: ModuleType, report: dict) -> Implementation:
    if args.precision != "fp32" and args.impl != "candidate":
        raise common.UsageError(f"--precision {args.precision} is the candidate's alone: eager "
                                "and torch.compile are timed in full fp32")
    if args.impl == "candidate":
        if not args.workspace or args.kernel_lib is None:
            raise common.UsageError("--impl candidate needs --workspace and --kernel-lib")
        model, guard, watch = common.load_candidate_model(args.workspace, args.kernel_lib, init,
                                                          args.init_seed, args.device, report)

        def after(inputs: list, outputs: list) -> None:
            common.check_output_types(outputs)
            common.after_call(guard, watch, (inputs, outputs))

        def forward(inputs: list) -> list:
            return common.call_candidate(model, inputs, guard, args.device, guard_held=True)

        return Implementation(forward, after, watch, TimedGuard(guard))

    watch = Watch(args.device, [])
    try:
        model, _ = common.build_model(task.Model, init, args.init_seed, args.device)
    except Exception as error:
        raise common.TaskError(f"building the task's Model failed: {error}") from error
    if args.impl == "compile":
        model = common.torch_compile(model, args.device)

    def forward(inputs: list) -> list:
        try:
            output = model(*inputs)
            common.synchronize(args.device)
        except Exception as error:
            raise common.TaskError(f"the task's Model ({args.impl}) failed: "
                                   f"{type(error).__name__}: {error}") from error
        return common.output_list(output)

    def after(inputs: list, outputs: list) -> None:
        watch.check_threads_idle("after the call")
        watch.check("during the call")

    return Implementation(forward, after, watch)


def time_calls(impl: Implementation, base_sets: list[list], args: Any, report: dict) -> None:
    """Warm-up on the profile sets, then the timed calls of the plan the secret gives."""
    cuda = args.device == "cuda"
    flush_ints = int(args.flush_mb * (1 << 20)) // 4
    flush = torch.empty(flush_ints, dtype=torch.int32, device=args.device) if flush_ints else None
    l2 = impl.watch.l2
    with common.step(report, "warmup"):
        for i in range(args.warmup):
            inputs = common.TimedPlan.copy(base_sets[i % len(base_sets)])
            with impl.warmup_guard():
                outputs = impl.forward(inputs)
            impl.after(inputs, outputs)
            del outputs, inputs
    impl.watch.settled()  # thread pools the warm-up started are not new
    if cuda:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream()

    secret = common.wait_for_secret(args.wait_for) if args.wait_for else 0
    plan = common.TimedPlan(secret, args.iters, len(base_sets), args.save_calls)
    times, host, fingerprints, kept = [], [], [], []
    spill = common.Spill(args.out)
    with common.step(report, "timed"):
        for i in range(args.iters):
            inputs = plan.inputs(base_sets, i)
            if flush is not None:
                _fill(flush, i)
            if l2 is not None:
                l2.reset()  # T10: no line stays pinned in L2 through the flush
            if cuda:
                with impl.timed_guard():
                    _cuda_sync()
                    begin = _perf_ns()
                    _record(start, stream)
                    outputs = impl.forward(inputs)
                    _cuda_sync()  # the whole device: work left on any stream is measured
                    _record(end, stream)
                    _event_sync(end)
                    host.append((_perf_ns() - begin) / 1000.0)
                impl.watch.returned()
                times.append(_elapsed_ms(start, end) * 1000.0)
            else:
                with impl.timed_guard():
                    begin = _perf_ns()
                    outputs = impl.forward(inputs)
                    times.append((_perf_ns() - begin) / 1000.0)
                impl.watch.returned()
                host.append(times[-1])
            impl.after(inputs, outputs)
            fingerprints.append(plan.fingerprint(outputs))
            if i in plan.saved:
                kept.append(spill(outputs))
            del outputs, inputs
    with common.step(report, "write"):
        common.save_bundle({"fingerprints": fingerprints, "saved": plan.saved, "outputs": kept},
                           args.out)
    report.update(times_us=times, host_us=host)


def percentile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks of an ascending list."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def main(args: Any, report: dict) -> None:
    if args.warmup < 0 or args.iters < 1:
        raise common.UsageError("--warmup must be at least 0 and --iters at least 1")
    if args.flush_mb < 0 or (args.flush_mb == 0 and args.device == "cuda"):
        raise common.UsageError("--flush-mb must be positive on cuda and at least 0 on cpu")
    if args.save_calls < 0:
        raise common.UsageError("--save-calls must be at least 0")
    report.update(impl=args.impl, iters=args.iters, warmup=args.warmup, torch=torch.__version__,
                  device_name=common.device_name(args.device))
    init = common.load_bundle(args.init)
    task = common.load_task(args.task)
    common.shrink_task(task, args.shrink)
    with common.step(report, "inputs"):
        # Drawn before any candidate code is loaded, and held on the device for the calls.
        sets = input_sets.InputSets(args.inputs, task, args.device)
        base_sets = [sets.profile(k) for k in range(sets.profile_count)]
    with common.step(report, "build"):
        impl = build(args, init, task, report)
    time_calls(impl, base_sets, args, report)
    ordered = sorted(report["times_us"])
    report.update(median_us=percentile(ordered, 0.5),
                  p10_us=percentile(ordered, 0.1), p90_us=percentile(ordered, 0.9),
                  min_us=ordered[0], max_us=ordered[-1])


def before_release(args: Any) -> None:
    """torch.compile's own modules (dynamo and inductor: seconds to import) loaded with the
    start-up, so that the compile of the task's graph inside the warm-up is what is left for the
    locked device's time."""
    if args.impl == "compile":
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401


def while_waiting(args: Any) -> None:
    """On cuda, inductor's other one-time costs, paid after the start-up (the evaluator, holding
    the device, waits for every step's start-up before candidate code runs) and before the
    release, which comes after the candidate's verification and eager's timing."""
    if args.impl == "compile" and args.device == "cuda":
        warm_inductor()


class _WarmGraph(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0).sum(-1)


def warm_inductor() -> bool:
    """Inductor's compile workers starting (in the background: waiting for them took 13 s on
    the GPU machine, longer than the release may take to come) and a small graph (a pointwise
    kernel and a reduction) lowered and compiled for the device in this process, never run:
    Triton's and the code generators' imports and first compiles happen here. Nothing reaches
    the device but an allocation. False, and no harm done, where any of it fails: the task's
    compile then pays for it as before."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
        from torch._inductor.compile_fx import compile_fx

        maybe_warm_pool()
        graph = torch.fx.symbolic_trace(_WarmGraph())
        compile_fx(graph, [torch.empty(64, 128, device="cuda")])
        return True
    except Exception:  # trusted code, but only an optimisation: the timing does not depend on it
        return False


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main, before_release, while_waiting))
