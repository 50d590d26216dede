"""Measures what `cuda-agent tasks check` filters tasks by (trusted; runs task files, never
candidates): whether each task runs in eager and under torch.compile, is deterministic, has
outputs that depend on its inputs and weights, how long it takes, and its graph IR.

One process works through a list of tasks (torch.compile's first call in a process costs
seconds, later ones far less) and appends one JSON line per task to --results the moment it is
measured; it writes the index of the task it is on to --progress first, so the evaluator can end
a task that hangs and start a new process on the rest. The decisions (which task is dropped, for
which reason) are the evaluator's, from these measurements."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import contextlib
import copy
import json
import statistics
import time
from typing import Any, Callable, Iterator

import torch

import capture
import common
from check import compare_output


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--tasks", required=True,
                        help="JSON list of {path, key}: the tasks, in order")
    parser.add_argument("--results", required=True, help="JSON Lines file appended to")
    parser.add_argument("--progress", required=True, help="gets the index of the current task")
    parser.add_argument("--capture-only", action="store_true",
                        help="only the graph IR (for a reference set)")
    parser.add_argument("--seed", type=int, default=0, help="weights and first input draw")
    parser.add_argument("--atol", type=float, default=1e-2)
    parser.add_argument("--rtol", type=float, default=1e-2)
    parser.add_argument("--repeat-tol", type=float, default=1e-5,
                        help="atol and rtol within which a repeated call must agree")
    parser.add_argument("--timing-budget-s", type=float, default=1.0,
                        help="time spent timing each of eager and compiled (default %(default)s)")
    parser.add_argument("--gpu-lock",
                        help="a file locked while this process runs work on the GPU, so that "
                             "parallel workers' timings do not overlap")
    return parser


# --- running a task -----------------------------------------------------------------------------


class Run:
    """A task's model and two input draws on the device, and the calls the checks make."""

    def __init__(self, task: Any, device: str, seed: int) -> None:
        # Weights and inputs are made on the device itself: a full-size draw takes seconds on
        # the CPU and milliseconds on a GPU. (They are other numbers than the evaluator's, which
        # draws on the CPU; any draw serves these checks.)
        with torch.device(device):
            torch.manual_seed(seed)
            self.init_inputs = list(task.get_init_inputs())
            torch.manual_seed(seed)
            self.model = task.Model(*self.init_inputs).to(device)
            self.draws = []
            for k in (seed, seed + 1):
                torch.manual_seed(k)
                self.draws.append(common.to_device(list(task.get_inputs()), device))
        self.device = device

    def call(self, fn: Callable, inputs: list) -> list:
        """fn on fresh copies of the inputs (a task that writes into an input must not change
        the next call's), its outputs as a list."""
        with torch.no_grad():
            outputs = common.output_list(fn(*common.to_device(inputs, self.device)))
        common.synchronize(self.device)
        return outputs


# Elements compared first, spread evenly over a large output.
SAMPLE = 4096


def matches(expected: list, got: list, atol: float, rtol: float) -> bool:
    """Whether every output matches. A mismatch among a sample of each large output decides it
    at once (the degeneracy probes differ nearly everywhere, and the full comparison of millions
    of values in float64 takes a second on the CPU); a sample that matches proves nothing, so
    the whole outputs are then compared."""
    if len(expected) != len(got):
        return False
    for e, g in zip(expected, got):
        if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.shape == g.shape \
                and e.dtype == g.dtype and e.numel() > SAMPLE:
            picked = torch.linspace(0, e.numel() - 1, SAMPLE, device=e.device).long()
            if compare_output(e.reshape(-1)[picked], g.reshape(-1)[picked], atol, rtol,
                              e.device.type)[0] is not None:
                return False
    return all(compare_output(e, g, atol, rtol, e.device.type if isinstance(e, torch.Tensor)
                              else "cpu")[0] is None for e, g in zip(expected, got))


def max_abs_diff(expected: list, got: list) -> float | None:
    worst = None
    for e, g in zip(expected, got):
        if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.shape == g.shape:
            d = float((e.double() - g.double()).abs().max()) if e.numel() else 0.0
            worst = d if worst is None else max(worst, d)
    return worst


def degeneracy(run: Run, outputs: list, args: Any) -> dict[str, Any]:
    """What a kernel that computes nothing could match: zeros, one constant, the answer for
    another input draw, the answer with one input or the weights changed."""
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    zeros = [torch.zeros_like(o) for o in tensors]
    constants = [torch.full_like(o, float(o.double().median()) if o.numel() else 0.0)
                 for o in tensors]
    found: dict[str, Any] = {
        "matches_zero": matches(tensors, zeros, args.atol, args.rtol),
        "matches_constant": matches(tensors, constants, args.atol, args.rtol),
    }
    first, second = run.draws
    found["same_for_other_draw"] = matches(outputs, run.call(run.model, second), args.atol,
                                           args.rtol)
    insensitive = []
    for i, (a, b) in enumerate(zip(first, second)):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
                and not torch.equal(a, b):
            swapped = first[:i] + [b] + first[i + 1:]
            if matches(outputs, run.call(run.model, swapped), args.atol, args.rtol):
                insensitive.append(i)
    found["insensitive_inputs"] = insensitive
    weights = [p for p in run.model.parameters() if p.is_floating_point()]
    found["has_weights"] = bool(weights)
    if weights:
        perturbed = copy.deepcopy(run.model)
        with torch.no_grad():
            for p in perturbed.parameters():
                if p.is_floating_point():
                    p.add_(torch.randn_like(p) * max(0.1, float(p.float().std()) if
                                                     p.numel() > 1 else 0.1))
        found["insensitive_weights"] = matches(outputs, run.call(perturbed, first), args.atol,
                                               args.rtol)
        del perturbed
    return found


# --- timing -------------------------------------------------------------------------------------

L2_FLUSH_BYTES = 256 << 20


def time_ms(run: Run, fn: Callable, budget_s: float, max_calls: int = 100) -> float:
    """Median milliseconds of one call, L2 flushed before each on the GPU, over as many calls as
    fit the budget (at least 3)."""
    inputs = run.draws[0]
    with torch.no_grad():
        fn(*inputs)  # warm
        common.synchronize(run.device)
        times: list[float] = []
        began = time.perf_counter()
        if run.device == "cuda":
            flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
            while len(times) < 3 or (time.perf_counter() - began < budget_s
                                     and len(times) < max_calls):
                flush.random_(0, 255)
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            while len(times) < 3 or (time.perf_counter() - began < budget_s
                                     and len(times) < max_calls):
                mark = time.perf_counter()
                fn(*inputs)
                times.append((time.perf_counter() - mark) * 1e3)
    return statistics.median(times)


# --- one task -----------------------------------------------------------------------------------


class StageError(Exception):
    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.stage = stage


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    try:
        yield
    except StageError:
        raise
    except Exception as error:
        raise StageError(name, error) from error


def measure(path: str, args: Any, result: dict[str, Any], lock: str | None) -> None:
    """Fills result with the task's measurements, stage by stage; a stage that raises ends it
    (StageError names the stage). GPU work runs holding `lock`, torch.compile's compile aside."""
    with stage("load"):
        task = common.load_task(path)
        result["sizes"] = common.shrink_task(task, args.shrink)
    run: Run | None = None

    def build() -> tuple[torch.nn.Module, list]:
        nonlocal run
        run = run or Run(task, "cpu", args.seed)
        return run.model, run.draws[0]

    try:
        result["graph"] = capture.capture_task(task, build)
    except Exception as error:
        result["graph_error"] = f"{type(error).__name__}: {error}"
    if args.capture_only:
        return

    with common.gpu_lock(lock):
        with stage("eager"):
            run = Run(task, args.device, args.seed)
            outputs = run.call(run.model, run.draws[0])
            result["outputs"] = [common.describe(o) for o in outputs]
        with stage("repeat"):
            again = run.call(run.model, run.draws[0])
            result["repeat_max_abs_diff"] = max_abs_diff(outputs, again)
            result["deterministic"] = matches(outputs, again, args.repeat_tol, args.repeat_tol)
            del again
        with stage("degeneracy"):
            result.update(degeneracy(run, outputs, args))
        release_cached_memory(args.device)  # other processes' tasks need it while this compiles

    with stage("compile"):
        torch._dynamo.reset()
        compiled = common.torch_compile(run.model, args.device)
        mark = time.perf_counter()
        with torch.no_grad():
            compiled(*run.draws[0])
        common.synchronize(args.device)
        result["compile_s"] = round(time.perf_counter() - mark, 3)
    with common.gpu_lock(lock):
        with stage("compile"):
            got = run.call(compiled, run.draws[0])
            result["compile_max_abs_diff"] = max_abs_diff(outputs, got)
            result["compile_matches"] = matches(outputs, got, args.atol, args.rtol)
            del got
        with stage("timing"):
            result["eager_ms"] = round(time_ms(run, run.model, args.timing_budget_s), 4)
            result["compile_ms"] = round(time_ms(run, compiled, args.timing_budget_s), 4)


def release_cached_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()


def attempt(path: str, key: str, args: Any, lock: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"key": key, "path": path, "shrink": args.shrink, "ok": False}
    try:
        measure(path, args, result, lock)
        result["ok"] = True
    except StageError as error:
        result["stage"], result["error"] = error.stage, str(error)
        result["out_of_memory"] = isinstance(error.__cause__, torch.OutOfMemoryError)
    except common.Failure as error:
        result["stage"], result["error"] = "load", str(error)
    finally:
        torch._dynamo.reset()
        torch.set_default_dtype(torch.float32)
        release_cached_memory(args.device)
    return result


def check_one(path: str, key: str, args: Any) -> dict[str, Any]:
    """The task's record. A task that ran out of GPU memory beside other processes' tasks is
    measured again holding the GPU to itself: only then is running out of memory its own."""
    mark = time.perf_counter()
    result = attempt(path, key, args, args.gpu_lock)
    if result.get("out_of_memory") and args.gpu_lock:
        with common.gpu_lock(args.gpu_lock):
            result = attempt(path, key, args, None)
        result["measured_alone"] = True
    result.pop("out_of_memory", None)
    result["wall_s"] = round(time.perf_counter() - mark, 3)
    return result


def warm_up_compile(device: str) -> None:
    """torch.compile's first call in a process loads and initialises the compiler (seconds to
    tens of seconds): paid here, before the first task, so that no task's time limit or
    compile_s carries it."""
    compiled = common.torch_compile(lambda x: torch.relu(x) * 2 + 1, device)
    with torch.no_grad():
        compiled(torch.randn(64, 64, device=device))
    common.synchronize(device)
    torch._dynamo.reset()


def main(args: Any, report: dict) -> None:
    with open(args.tasks) as f:
        tasks = json.load(f)
    device_name = report["device_name"] = common.device_name(args.device)
    report["torch"] = torch.__version__
    if not args.capture_only:
        warm_up_compile(args.device)
    done = 0
    for index, entry in enumerate(tasks):
        common.write_text_atomic(args.progress, str(index))
        result = check_one(entry["path"], entry["key"], args)
        result["device_name"] = device_name
        with open(args.results, "a") as f:
            f.write(json.dumps(common.jsonable(result)) + "\n")
        done += 1
    report["checked"] = done


if __name__ == "__main__":
    common.run_script(make_parser(), main)
