"""Evaluates a handful of CUDA candidates for the example task on the GPU and prints one table:
stage times, speedups, rewards. The candidates are the example's correct kernel and variants of
it that are wrong, address memory out of bounds, fall back to torch, or hide work on a side
stream; a correct candidate runs again after the crash, to show the GPU is still usable. The task
is the example at 32768 x 2048 (256 MiB a tensor), so the kernels' time outweighs launch costs.

    python3 bench/eval_gpu.py            # writes eval_gpu.json to $OUT or bench/results
"""
import tempfile
from pathlib import Path

from common import print_table, run_eval, scaled_task, variant, write_json

KERNEL = "kernels/scale_bias_relu.cu"
ROWS = 32768

CANDIDATES: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("correct", []),
    ("wrong (bias dropped)", [
        (KERNEL, "float4 b = bias[i % cols4];", "float4 b = make_float4(0.f, 0.f, 0.f, 0.f);"),
        (KERNEL, "fmaf(x[i], scale, bias[i % cols])", "x[i] * scale"),
    ]),
    ("illegal address", [(KERNEL, "    y[i] = v;", "    y[i + (1LL << 34)] = v;")]),
    ("correct, after the crash", []),
    ("torch fallback", [
        ("model_new.py", "        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)\n",
         "        y = torch.relu(x * self.scale + self.bias)\n"),
    ]),
    ("side stream", [
        (KERNEL, "  const int64_t n = rows * cols;",
         "  static cudaStream_t side = nullptr;\n"
         "  if (side == nullptr && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) return 1;\n"
         "  stream = side;\n"
         "  const int64_t n = rows * cols;"),
    ]),
]


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="eval-gpu-"))
    store, cache = work / "store.sqlite", work / "cache"
    task = scaled_task(work, ROWS)
    rows, records = [], []
    for i, (name, edits) in enumerate(CANDIDATES):
        candidate = variant("cuda", work / f"candidate-{i}", edits)
        record, wall = run_eval(store, cache, candidate, "cuda", task=task)
        records.append({"candidate": name, "wall_s": wall, "result": record})
        stages = record["stages"]
        speedups = record["speedups"]
        timing = stages["profile"]["data"].get("candidate") or {}
        spread = (f"{timing['p10_us']:.1f}-{timing['p90_us']:.1f}"
                  if record["candidate_us"] is not None else "-")
        rows.append([name, record["outcome"], f"{wall:.1f}", fmt(stages["compile"]["seconds"], ".2f"),
                     fmt(stages["verify"]["seconds"], ".2f"), fmt(stages["profile"]["seconds"], ".2f"),
                     fmt(record["eager_us"], ".1f"), fmt(record["compile_us"], ".1f"),
                     fmt(record["candidate_us"], ".1f"), spread, fmt(speedups["vs_eager"], ".2f"),
                     fmt(speedups["vs_compile"], ".2f"), record["reward"], record["reason"][:70]])
        # Written after every candidate, so a run cut short keeps what it measured.
        path = write_json("eval_gpu.json", {"device_name": records[0]["result"]["device_name"],
                                            "torch": records[0]["result"]["torch"],
                                            "candidates": records})
    print(f"device: {records[0]['result']['device_name']}, torch {records[0]['result']['torch']}")
    print_table(["candidate", "outcome", "eval s", "compile s", "verify s", "profile s",
                 "eager us", "compile us", "cand. us", "p10-p90", "x eager", "x compile", "r",
                 "reason"], rows)
    print(f"written: {path}")


if __name__ == "__main__":
    main()
