"""Times eager and torch.compile on every task of the built-in suite at full size and shows that
the runtime window holds: `cuda-agent tasks check tasks --device cuda`, whose measurements this
prints as a table per level and writes as JSON (tasks_suite.json, with the check's own report
beside it as tasks_check.json).

    source bench/device_env.sh && python3 bench/tasks_suite.py [--jobs 4] [--suite DIR]
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, binary, geomean, results_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(ROOT / "tasks"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--jobs", type=int, default=4,
                        help="checking processes (their GPU work takes turns)")
    parser.add_argument("--window-ms", nargs=2, type=float, default=[0.5, 20.0])
    parser.add_argument("--timing-budget", type=float, default=0.3,
                        help="seconds of timed calls per task for each of eager and compiled")
    args = parser.parse_args()

    out = results_dir()
    report_path = out / "tasks_check.json"
    began = time.perf_counter()
    command = [binary(), "tasks", "check", args.suite, "--device", args.device,
               "--jobs", str(args.jobs), "--window-ms", *map(str, args.window_ms),
               "--timing-budget", str(args.timing_budget),
               # Kept beside the checkout, so that a run cut short resumes where it stopped.
               "--work-dir", str(ROOT / "bench" / "results" / "tasks-check-work"),
               "--report", str(report_path)]
    done = subprocess.run(command, text=True, stdout=subprocess.PIPE)
    wall = time.perf_counter() - began
    if not report_path.exists():
        print(done.stdout)
        print(f"tasks check wrote no report (exit {done.returncode})", file=sys.stderr)
        return 2
    report = json.loads(report_path.read_text())

    rows = []
    for t in report["tasks"]:
        m = t["measurement"]
        eager, compiled = m.get("eager_ms"), m.get("compile_ms")
        rows.append({
            "id": t["id"], "level": t["level"], "kept": t["kept"],
            "reasons": [r["name"] for r in t["reasons"]],
            "eager_ms": eager, "compile_ms": compiled,
            "compile_speedup": eager / compiled if eager and compiled else None,
            "compile_s": m.get("compile_s"),
            "dtype": (m.get("outputs") or [{}])[0].get("dtype"),
        })

    lo, hi = args.window_ms
    print(f"{'task':44} {'dtype':9} {'eager ms':>9} {'compile ms':>10} {'eager/comp':>10}  "
          "verdict")
    for r in rows:
        def fmt(v, spec):
            return format(v, spec) if isinstance(v, (int, float)) else "-"
        verdict = "kept" if r["kept"] else "dropped: " + ", ".join(r["reasons"])
        print(f"{r['id']:44} {str(r['dtype']):9} {fmt(r['eager_ms'], '9.3f')} "
              f"{fmt(r['compile_ms'], '10.3f')} {fmt(r['compile_speedup'], '10.2f')}  {verdict}")

    print(f"\n{'level':8} {'tasks':>5} {'kept':>5} {'in window':>9} {'min eager':>9} "
          f"{'max eager':>9} {'geomean eager/compile':>22}")
    summary = {}
    for level in sorted({r["level"] for r in rows}) + ["all"]:
        chosen = [r for r in rows if level in ("all", r["level"])]
        eager = [r["eager_ms"] for r in chosen if r["eager_ms"]]
        inside = sum(1 for e in eager if lo <= e <= hi)
        ratio = [r["compile_speedup"] for r in chosen if r["compile_speedup"]]
        summary[level] = {"tasks": len(chosen), "kept": sum(r["kept"] for r in chosen),
                          "in_window": inside, "min_eager_ms": min(eager, default=None),
                          "max_eager_ms": max(eager, default=None),
                          "geomean_eager_over_compile": geomean(ratio)}
        s = summary[level]
        print(f"{level:8} {s['tasks']:5} {s['kept']:5} {inside:9} "
              f"{s['min_eager_ms'] or float('nan'):9.3f} {s['max_eager_ms'] or float('nan'):9.3f} "
              f"{s['geomean_eager_over_compile']:22.2f}")
    print(f"\nwindow {lo}-{hi} ms on {report.get('device_name')}; {wall:.0f} s for the whole check "
          f"with {args.jobs} processes")

    (out / "tasks_suite.json").write_text(json.dumps({
        "device_name": report.get("device_name"), "window_ms": [lo, hi], "jobs": args.jobs,
        "wall_s": round(wall, 1), "summary": summary, "tasks": rows}, indent=2) + "\n")
    return 0 if all(r["kept"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
