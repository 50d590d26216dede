"""Every convolution the built-in tasks run, timed in the layout eager PyTorch gives it (NCHW,
contiguous) and in channels-last (input and weight in NHWC memory, as torch.compile's layout
optimization lays them out), in full fp32 (the evaluator's precision) and in TF32, and in fp32 with
cuDNN's benchmark mode on (`torch.backends.cudnn.benchmark`: each shape's algorithm chosen by
timing them all on its first call rather than by cuDNN's heuristics); then each task's whole
eager forward with benchmark mode off and on. An exploration for the pipelines, which call the
library's convolutions: prints two tables and writes conv_layouts.json to $OUT or bench/results/.

    source bench/device_env.sh && python3 bench/conv_layouts.py [--only level2/032_... ...]
"""
import argparse
import importlib.util
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from common import ROOT, results_dir, suite_tasks

# The harness's watch.py (this folder's common.py holds the harness common's name): the precision
# flags as the evaluator pins them.
_spec = importlib.util.spec_from_file_location("harness_watch", ROOT / "harness" / "watch.py")
watch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(watch)

CONVOLUTIONS = {F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d,
                F.conv_transpose3d}


class Recorder(TorchFunctionMode):
    """Keeps the convolutions a forward calls: the function, its tensors' shapes, the rest."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in CONVOLUTIONS:
            shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args[:3]]
            rest = list(args[3:])
            self.calls.append((func, shapes, rest, dict(kwargs)))
        return func(*args, **kwargs)


def channels_last(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t  # a 1-d convolution's (N, C, L) has no channels-last layout


def median_ms(fn, reps: int) -> float:
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--levels", nargs="*", default=["level1", "level2", "level3"])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    rows = []
    forwards = []
    print(f"{'task':44} {'convolution':54} {'nchw':>7} {'nhwc':>7} {'ratio':>6} "
          f"{'bm nchw':>7} {'bm nhwc':>7} {'tf32 nchw':>9} {'tf32 nhwc':>9} {'ratio':>6}",
          flush=True)
    for task in suite_tasks(ROOT / "tasks", args.levels, args.only):
        source = task.read_text()
        if "conv" not in source:
            continue
        spec = importlib.util.spec_from_file_location("task_module", task)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).cuda().eval()
        with torch.device("cuda"):
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        recorder = Recorder()
        with torch.no_grad(), recorder:
            model(*inputs)
        for func, shapes, rest, kwargs in recorder.calls:
            x = torch.randn(shapes[0], device="cuda", dtype=inputs[0].dtype)
            w = torch.randn(shapes[1], device="cuda", dtype=x.dtype)
            b = torch.randn(shapes[2], device="cuda", dtype=x.dtype) if shapes[2] else None
            x_last, w_last = channels_last(x), channels_last(w)
            times = {}
            with torch.no_grad():
                for prefix in ("", "bm_", "tf32_"):
                    watch.pin_precision("tf32" if prefix == "tf32_" else "fp32")
                    torch.backends.cudnn.benchmark = prefix == "bm_"
                    times[prefix + "nchw_ms"] = median_ms(
                        lambda: func(x, w, b, *rest, **kwargs), args.reps)
                    times[prefix + "nhwc_ms"] = median_ms(
                        lambda: func(x_last, w_last, b, *rest, **kwargs), args.reps)
            watch.pin_precision("fp32")
            torch.backends.cudnn.benchmark = False
            label = f"{func.__name__} {shapes[0]} w{shapes[1]} {rest}"[:54]
            row = {"task": f"{task.parent.name}/{task.stem}", "conv": func.__name__,
                   "input": shapes[0], "weight": shapes[1], "args": repr(rest), **times}
            rows.append(row)
            print(f"{row['task']:44} {label:54} {times['nchw_ms']:7.3f} {times['nhwc_ms']:7.3f} "
                  f"{times['nchw_ms'] / times['nhwc_ms']:6.2f} {times['bm_nchw_ms']:7.3f} "
                  f"{times['bm_nhwc_ms']:7.3f} {times['tf32_nchw_ms']:9.3f} "
                  f"{times['tf32_nhwc_ms']:9.3f} "
                  f"{times['tf32_nchw_ms'] / times['tf32_nhwc_ms']:6.2f}", flush=True)
        if recorder.calls:
            with torch.no_grad():
                forward = {"task": f"{task.parent.name}/{task.stem}"}
                for benchmark in (False, True):
                    torch.backends.cudnn.benchmark = benchmark
                    forward["bm_ms" if benchmark else "ms"] = median_ms(
                        lambda: model(*inputs), args.reps)
                torch.backends.cudnn.benchmark = False
                forwards.append(forward)
        del model, inputs
        torch.cuda.empty_cache()
    print(f"\n{'task (eager forward, fp32)':44} {'ms':>8} {'bm ms':>8} {'ratio':>6}")
    for f in forwards:
        print(f"{f['task']:44} {f['ms']:8.3f} {f['bm_ms']:8.3f} {f['ms'] / f['bm_ms']:6.2f}")
    out = results_dir()
    (out / "conv_layouts.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                                       "rows": rows, "forwards": forwards}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
