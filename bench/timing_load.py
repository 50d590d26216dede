"""What the machine's other work does to the evaluator's times: harness/prepare.py once (its
steps' seconds, in a bare process), then harness/timing.py for eager, torch.compile and the
synthesizer's candidate, each on an idle machine and beside --load busy processes (a bench's
other jobs: nvcc, harness start-ups, inductor's compile workers). timing.py brackets each call
with CUDA events, so host time spent before the kernel's launch counts: an implementation that
does more on the host per call loses more to a loaded CPU. Prints a table, writes
timing_load.json.

    source bench/device_env.sh && python3 bench/timing_load.py [--task tasks/level1/002_leaky_relu.py]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, build_candidate, results_dir

HARNESS = ROOT / "harness"


def harness(script: str, args: list[str], report: Path) -> dict:
    done = subprocess.run([sys.executable, str(HARNESS / script), *args, "--report", str(report)],
                          text=True, capture_output=True)
    if not report.exists():
        raise SystemExit(f"{script} wrote no report: {done.stderr[-2000:]}")
    result = json.loads(report.read_text())
    if not result.get("ok"):
        raise SystemExit(f"{script} failed: {json.dumps(result)[:2000]}")
    return result


def busy(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default=str(ROOT / "tasks" / "level1" / "002_leaky_relu.py"))
    parser.add_argument("--load", type=int, default=os.cpu_count(),
                        help="busy processes beside the loaded runs (default: one a core)")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: eager and torch.compile only, at --shrink (a dry run)")
    parser.add_argument("--shrink", type=int, default=1)
    args = parser.parse_args()
    task = Path(args.task).resolve()
    work = Path(tempfile.mkdtemp(prefix="timing-load-"))
    data = work / "data"

    common = ["--device", args.device, "--shrink", str(args.shrink)]
    prepared = harness("prepare.py", ["--task", str(task), "--seed", "12345", "--init-seed", "678",
                                      "--out", str(data), *common], work / "prepare.json")
    print(f"prepare.py, bare: {prepared['phases']}")
    impls = ["eager", "compile"]
    if args.device == "cuda":
        workspace, lib = build_candidate(task, work, args.arch)
        impls.append("candidate")

    rows = []
    for load in (0, args.load):
        for impl in impls:
            extra = (["--workspace", str(workspace), "--kernel-lib", str(lib)]
                     if impl == "candidate" else [])
            others = busy(load)
            try:
                report = harness("timing.py", [
                    "--impl", impl, "--task", str(task), "--init", str(data / "init.pt"),
                    "--inputs", str(data / "inputs.json"), "--init-seed", "678",
                    "--warmup", "10", "--iters", str(args.iters), "--flush-mb",
                    "256" if args.device == "cuda" else "0", "--save-calls", "0", *common, "--out",
                    str(work / f"timed_{impl}.pt"), *extra], work / f"timing_{impl}.json")
            finally:
                for p in others:
                    p.kill()
                    p.wait()
            gaps = [h - t for h, t in zip(report["host_us"], report["times_us"])]
            rows.append({"impl": impl, "load": load, "median_us": report["median_us"],
                         "p10_us": report["p10_us"], "p90_us": report["p90_us"],
                         "host_minus_device_us": statistics.median(gaps)})

    print(f"\n{Path(args.task).name}, {args.iters} timed calls each, L2 flushed, fresh inputs\n")
    print(f"{'impl':10} {'busy':>4} {'median us':>10} {'p10 us':>8} {'p90 us':>8} "
          f"{'host - device us':>16}")
    for r in rows:
        print(f"{r['impl']:10} {r['load']:4} {r['median_us']:10.1f} {r['p10_us']:8.1f} "
              f"{r['p90_us']:8.1f} {r['host_minus_device_us']:16.1f}")
    shutil.rmtree(work, ignore_errors=True)  # the input sets: tens of GB at full size
    out = results_dir() / "timing_load.json"
    out.write_text(json.dumps({"task": str(task), "prepare": prepared["phases"], "rows": rows},
                              indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
