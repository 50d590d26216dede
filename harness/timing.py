"""Times one implementation of a task: eager Model, torch.compile(Model) or the candidate's
ModelNew (trusted for eager and compile; untrusted for the candidate)."""

import faulthandler

faulthandler.enable()

import math
import sys
import time
from typing import Any, Callable

import torch

import common


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--impl", required=True, choices=["eager", "compile", "candidate"])
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--workspace", help="folder holding model_new.py (candidate only)")
    parser.add_argument("--kernel-lib", help="the compiled kernel library (candidate only)")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True, help="profile_inputs.pt from prepare.py")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=10,
                        help="untimed calls first (default %(default)s)")
    parser.add_argument("--iters", type=int, default=50,
                        help="timed calls (default %(default)s)")
    parser.add_argument("--flush-mb", type=float, default=256,
                        help="MiB overwritten before each timed call to evict the L2; 0 skips "
                             "it, on cpu only (default %(default)s)")
    return parser


def build_forward(args: Any, init: dict, report: dict) -> Callable[[list], list]:
    """A call of the implementation on one input set, ending in a device synchronize."""
    if args.impl == "candidate":
        if not args.workspace or args.kernel_lib is None:
            raise common.UsageError("--impl candidate needs --workspace and --kernel-lib")
        model, guard = common.load_candidate_model(args.workspace, args.kernel_lib, init,
                                                   args.init_seed, args.device, report)
        return lambda inputs: common.call_candidate(model, inputs, guard, args.device)

    task = common.load_task(args.task)
    try:
        model, _ = common.build_model(task.Model, init, args.init_seed, args.device)
    except Exception as error:
        raise common.TaskError(f"building the task's Model failed: {error}") from error
    if args.impl == "compile":
        model = torch.compile(model)

    def forward(inputs: list) -> list:
        try:
            output = model(*inputs)
            common.synchronize(args.device)
        except Exception as error:
            raise common.TaskError(f"the task's Model ({args.impl}) failed: "
                                   f"{type(error).__name__}: {error}") from error
        return common.output_list(output)

    return forward


def time_calls(forward: Callable[[list], list], input_sets: list[list], args: Any) -> list[float]:
    """Microseconds of each timed call, rotating through the input sets, after the warm-up."""
    cuda = args.device == "cuda"
    check = common.check_output_types if args.impl == "candidate" else (lambda outputs: None)
    flush_ints = int(args.flush_mb * (1 << 20)) // 4
    flush = torch.empty(flush_ints, dtype=torch.int32, device=args.device) if flush_ints else None
    for i in range(args.warmup):
        check(forward(input_sets[i % len(input_sets)]))
    start = torch.cuda.Event(enable_timing=True) if cuda else None
    end = torch.cuda.Event(enable_timing=True) if cuda else None
    times = []
    for i in range(args.iters):
        inputs = input_sets[i % len(input_sets)]
        if flush is not None:
            flush.fill_(i)
        common.synchronize(args.device)
        if cuda:
            start.record()
            outputs = forward(inputs)  # ends in torch.cuda.synchronize(): all streams are done
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        else:
            begin = time.perf_counter_ns()
            outputs = forward(inputs)
            times.append((time.perf_counter_ns() - begin) / 1000.0)
        check(outputs)
        del outputs
    return times


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
    report.update(impl=args.impl, iters=args.iters, warmup=args.warmup, torch=torch.__version__,
                  device_name=common.device_name(args.device))
    init = common.load_bundle(args.init)
    input_sets = [common.to_device(inputs, args.device)
                  for inputs in common.load_bundle(args.inputs)]
    forward = build_forward(args, init, report)
    times = time_calls(forward, input_sets, args)
    ordered = sorted(times)
    report.update(times_us=times, median_us=percentile(ordered, 0.5),
                  p10_us=percentile(ordered, 0.1), p90_us=percentile(ordered, 0.9),
                  min_us=ordered[0], max_us=ordered[-1])


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
