"""Where a task's reference spends its time, op by op, on a device: what a policy profiles
before it writes kernels (the workspace's utils/profile_model.py runs it). Informational: nothing
the evaluator decides reads it."""

import startup  # noqa: F401  (first: no garbage collection while modules load)

import argparse
import statistics
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

import common


def main() -> int:
    common.collect_garbage_again()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--shrink", type=int, default=1,
                        help="divide the task's SCALABLE_SIZES constants by this")
    parser.add_argument("--calls", type=int, default=5, help="calls timed and profiled")
    parser.add_argument("--rows", type=int, default=15, help="ops listed")
    args = parser.parse_args()
    try:
        task = common.load_task(args.task)
        sizes = common.shrink_task(task, args.shrink)
    except (common.Failure, common.UsageError) as error:
        print(f"op_profile: {error}")
        return 2
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs()).to(args.device)
    inputs = common.to_device(list(task.get_inputs()), args.device)
    with torch.no_grad():
        for _ in range(2):  # warm: allocator, libraries, caches
            model(*inputs)
        common.synchronize(args.device)
        times = []
        for _ in range(args.calls):
            began = time.perf_counter()
            model(*inputs)
            common.synchronize(args.device)
            times.append((time.perf_counter() - began) * 1e3)
        activities = [ProfilerActivity.CPU]
        if args.device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=activities) as prof:
                for _ in range(args.calls):
                    model(*inputs)
                common.synchronize(args.device)
    shown = ", ".join(f"{name} {used}" + (f" (of {full})" if used != full else "")
                      for name, (full, used) in sizes.items())
    print(f"model.py on {args.device}{': ' + shown if shown else ''}")
    print(f"eager: {statistics.median(times):.3f} ms a call (median of {args.calls}, "
          "wall clock, device synchronised)")
    sort = "self_device_time_total" if args.device == "cuda" else "self_cpu_time_total"
    print(f"ops over {args.calls} calls, by self time on {args.device}:")
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
