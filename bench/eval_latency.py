"""How long an agent waits for the evaluator: median wall time of compile, verify and profile for a
one-kernel candidate, cold (empty build cache) and warm (unchanged sources), beside
torch.utils.cpp_extension.load of the same kernel rebuilt from scratch, all in one run; the whole
evaluation also with the harness scripts (trusted ones and the candidate's) started as fresh
interpreters rather than forked from the fork servers (CUDA_AGENT_FORK_SERVER=0), the two in
turn.

    python3 bench/eval_latency.py [--repeats 5] [--device cuda]   # writes eval_latency.json
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import EXAMPLE, print_table, run_eval, variant, write_json

# A torch binding for the example's kernel, as a torch C++ extension needs one.
TORCH_BINDING = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
extern "C" int scale_bias_relu(const float*, const float*, float*, int64_t, int64_t, float,
                               cudaStream_t);
torch::Tensor forward(torch::Tensor x, torch::Tensor bias, double scale) {
  auto y = torch::empty_like(x);
  int err = scale_bias_relu(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                            x.size(0), x.size(1), static_cast<float>(scale), nullptr);
  TORCH_CHECK(err == 0, "kernel failed: ", err);
  return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
"""

LOAD_SCRIPT = """
import sys, time
start = time.perf_counter()
from torch.utils.cpp_extension import load
load(name="scale_bias_relu_ext", sources=sys.argv[1:3], build_directory=sys.argv[3],
     extra_cuda_cflags=["-O3"], verbose=False)
print(time.perf_counter() - start)
"""


def median(values: list[float]) -> float:
    return statistics.median(values)


def torch_extension_build(work: Path, i: int) -> tuple[float, float]:
    """Wall time of a fresh process that imports torch and loads the extension from scratch, and
    the time inside it from the import to the loaded module."""
    build = work / f"ext-build-{i}"
    build.mkdir()
    binding = work / "binding.cpp"
    binding.write_text(TORCH_BINDING)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(binding),
                           str(EXAMPLE / "cuda" / "kernels" / "scale_bias_relu.cu"), str(build)],
                          capture_output=True, text=True, env={**__import__("os").environ,
                                                               "TORCH_CUDA_ARCH_LIST": "9.0"})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"torch extension build failed: {done.stderr[-2000:]}")
    return wall, float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--extension-repeats", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="eval-latency-"))
    store = work / "store.sqlite"
    candidate = variant(args.device, work / "candidate", [])
    samples: dict[str, list[float]] = {k: [] for k in (
        "compile_cold_stage_s", "compile_cold_wall_s", "compile_warm_stage_s", "compile_warm_wall_s",
        "verify_stage_s", "profile_stage_s", "eval_warm_wall_s", "verify_no_server_s",
        "profile_no_server_s", "eval_no_server_wall_s", "torch_ext_wall_s", "torch_ext_load_s")}

    for i in range(args.repeats):
        record, wall = run_eval(store, work / f"cold-cache-{i}", candidate, args.device,
                                "--stage", "compile")
        assert record["stages"]["compile"]["status"] == "ok", record["reason"]
        samples["compile_cold_stage_s"].append(record["stages"]["compile"]["seconds"])
        samples["compile_cold_wall_s"].append(wall)
    warm_cache = work / "cold-cache-0"
    for _ in range(args.repeats):
        record, wall = run_eval(store, warm_cache, candidate, args.device, "--stage", "compile")
        assert record["stages"]["compile"]["status"] == "cached", record["reason"]
        samples["compile_warm_stage_s"].append(record["stages"]["compile"]["seconds"])
        samples["compile_warm_wall_s"].append(wall)

    processes: list[list[dict]] = []  # per whole evaluation: each harness process's phases
    # One whole evaluation fills the baseline cache; the timed ones after it reuse it.
    record, _ = run_eval(store, warm_cache, candidate, args.device)
    assert record["outcome"] == "pass", record["reason"]
    for _ in range(args.repeats):
        record, wall = run_eval(store, warm_cache, candidate, args.device)
        assert record["outcome"] == "pass", record["reason"]
        assert record["stages"]["profile"]["data"]["eager"]["cached"]
        samples["verify_stage_s"].append(record["stages"]["verify"]["seconds"])
        samples["profile_stage_s"].append(record["stages"]["profile"]["seconds"])
        samples["eval_warm_wall_s"].append(wall)
        processes.append(record["sandbox"]["processes"])
        record, wall = run_eval(store, warm_cache, candidate, args.device,
                                env={"CUDA_AGENT_FORK_SERVER": "0"})
        assert record["outcome"] == "pass", record["reason"]
        samples["verify_no_server_s"].append(record["stages"]["verify"]["seconds"])
        samples["profile_no_server_s"].append(record["stages"]["profile"]["seconds"])
        samples["eval_no_server_wall_s"].append(wall)

    if args.device == "cuda":
        for i in range(args.extension_repeats):
            wall, inside = torch_extension_build(work, i)
            samples["torch_ext_wall_s"].append(wall)
            samples["torch_ext_load_s"].append(inside)

    medians = {k: (median(v) if v else None) for k, v in samples.items()}
    path = write_json("eval_latency.json", {"device": args.device, "device_name": record["device_name"],
                                            "torch": record["torch"], "repeats": args.repeats,
                                            "samples": samples, "medians": medians,
                                            "processes": processes})
    print(f"device: {record['device_name']}, torch {record['torch']}, {args.repeats} repeats "
          f"({args.extension_repeats} for the torch extension)")
    rows = [
        ["compile, cold cache (stage)", medians["compile_cold_stage_s"]],
        ["compile, cold cache (whole command)", medians["compile_cold_wall_s"]],
        ["compile, unchanged sources (stage)", medians["compile_warm_stage_s"]],
        ["verify (prepare + candidate + check)", medians["verify_stage_s"]],
        ["profile, cached baselines", medians["profile_stage_s"]],
        ["whole evaluation, cached baselines", medians["eval_warm_wall_s"]],
        ["verify, no fork server", medians["verify_no_server_s"]],
        ["profile, cached baselines, no fork server", medians["profile_no_server_s"]],
        ["whole evaluation, cached baselines, no fork server", medians["eval_no_server_wall_s"]],
        ["torch cpp_extension.load from scratch (process)", medians["torch_ext_wall_s"]],
        ["torch cpp_extension.load from scratch (in process)", medians["torch_ext_load_s"]],
    ]
    print_table(["median wall time", "seconds"],
                [[name, "-" if v is None else f"{v:.2f}"] for name, v in rows])
    print("\nharness processes of a whole evaluation (medians, seconds):")
    breakdown = []
    for i, first in enumerate(processes[0]):
        runs = [p[i] for p in processes if len(p) > i]
        def phase(name: str) -> str:
            values = [r["phases"].get(name) for r in runs if r["phases"].get(name) is not None]
            return f"{median(values):.2f}" if values else "-"
        breakdown.append([first["script"], f"{median([r['wall_s'] for r in runs]):.2f}",
                          phase("startup_s"), phase("device_s"), phase("waited_s"), phase("work_s")])
    print_table(["process", "wall", "startup", "device", "waited", "work"], breakdown)
    print(f"written: {path}")


if __name__ == "__main__":
    main()
