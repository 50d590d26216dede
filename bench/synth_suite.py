"""Runs the built-in synthesizer (`cuda-agent optimize TASK --policy synth`) over a suite and
prints, per task and per level, whether its candidate is correct, its speedup over eager and
over torch.compile and its reward; and overall, on the tasks whose ops a plan covers: pass rate,
share faster than torch.compile, geometric mean speedup over torch.compile. Writes
synth_suite.json. Each task's evaluation is kept in bench/results/synth-suite-work, so a run cut
short resumes where it stopped (--fresh starts over).

    source bench/device_env.sh && python3 bench/synth_suite.py [--device cuda] [--shrink 1]
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, binary, geomean, results_dir, suite_tasks


def evaluate(task: Path, args: argparse.Namespace, work: Path) -> dict:
    """The optimize command's record for one task, or why it has none."""
    level = task.parent.name
    record_path = work / f"{level}-{task.stem}.json"
    if record_path.exists():
        return json.loads(record_path.read_text())
    began = time.perf_counter()
    episode = work / "episodes" / f"{level}-{task.stem}"
    shutil.rmtree(episode, ignore_errors=True)  # left by a run cut short: it has no record
    row = {"id": f"{level}/{task.stem}", "level": level}
    try:
        done = subprocess.run(
            [binary(), "optimize", str(task), "--device", args.device, "--shrink",
             str(args.shrink), "--workspace", str(episode),
             "--stage", args.stage, "--tune", args.tune, "--json"],
            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.task_timeout)
    except subprocess.TimeoutExpired:
        row.update(covered=True, outcome="timeout", wall_s=args.task_timeout,
                   reason=f"optimize ran past {args.task_timeout:.0f} s")
        return row  # not kept: a later run tries again
    row["wall_s"] = round(time.perf_counter() - began, 1)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        message = done.stderr.strip().splitlines()
        covered = done.returncode != 3  # cuda-agent optimize: no candidate, no plan
        row.update(covered=covered, outcome="no_plan" if not covered else "error",
                   reason=" ".join(message[:3])[:400])
    else:
        speed = result.get("speedups") or {}
        row.update(covered=True, outcome=result.get("outcome"), correct=result.get("correct"),
                   reward=result.get("reward"), reason=result.get("reason"),
                   eager_us=result.get("eager_us"), compile_us=result.get("compile_us"),
                   candidate_us=result.get("candidate_us"),
                   vs_eager=speed.get("vs_eager"), vs_compile=speed.get("vs_compile"),
                   device_name=result.get("device_name"),
                   config=(result.get("tuning") or {}).get("label"))
    record_path.write_text(json.dumps(row) + "\n")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(ROOT / "tasks"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shrink", type=int, default=1)
    parser.add_argument("--levels", nargs="*", default=["level1", "level2", "level3"])
    parser.add_argument("--only", nargs="*", default=[],
                        help="task ids (level1/001_relu) to run, of those in the levels")
    parser.add_argument("--stage", default="all", choices=["verify", "all"],
                        help="verify: correctness only, no timing")
    parser.add_argument("--tune", default="auto", choices=["auto", "always", "off"],
                        help="optimize's --tune: off times only the default configuration")
    parser.add_argument("--task-timeout", type=float, default=600)
    parser.add_argument("--fresh", action="store_true", help="forget earlier evaluations")
    args = parser.parse_args()

    work = ROOT / "bench" / "results" / f"synth-suite-work-{args.device}-{args.shrink}-{args.stage}"
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    tasks = suite_tasks(Path(args.suite), args.levels, args.only)
    rows = []
    for k, task in enumerate(tasks, 1):
        row = evaluate(task, args, work)
        rows.append(row)
        print(f"[{k}/{len(tasks)}] {row['id']:44} {row['outcome']}", file=sys.stderr, flush=True)

    def fmt(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else "-"

    print(f"{'task':44} {'outcome':10} {'eager ms':>9} {'compile ms':>10} {'cand ms':>9} "
          f"{'vs eager':>8} {'vs comp':>8} {'reward':>6}")
    for r in rows:
        if not r["covered"]:
            continue
        print(f"{r['id']:44} {str(r['outcome']):10} {fmt((r.get('eager_us') or 0) / 1e3 or None, '9.3f')} "
              f"{fmt((r.get('compile_us') or 0) / 1e3 or None, '10.3f')} "
              f"{fmt((r.get('candidate_us') or 0) / 1e3 or None, '9.3f')} "
              f"{fmt(r.get('vs_eager'), '8.2f')} {fmt(r.get('vs_compile'), '8.2f')} "
              f"{fmt(r.get('reward'), '6d')}")

    print(f"\n{'level':8} {'tasks':>5} {'covered':>7} {'correct':>7} {'faster than compile':>19} "
          f"{'geomean vs compile':>18} {'geomean vs eager':>16}")
    summary = {}
    for level in args.levels + ["all"]:
        chosen = [r for r in rows if level in ("all", r["level"])]
        covered = [r for r in chosen if r["covered"]]
        correct = [r for r in covered if r.get("correct")]
        faster = [r for r in correct if (r.get("vs_compile") or 0) > 1.0]
        s = summary[level] = {
            "tasks": len(chosen), "covered": len(covered), "correct": len(correct),
            "faster_than_compile": len(faster),
            "geomean_vs_compile": geomean([r["vs_compile"] for r in correct if r.get("vs_compile")]),
            "geomean_vs_eager": geomean([r["vs_eager"] for r in correct if r.get("vs_eager")])}
        print(f"{level:8} {s['tasks']:5} {s['covered']:7} {s['correct']:7} "
              f"{s['faster_than_compile']:19} {s['geomean_vs_compile']:18.2f} "
              f"{s['geomean_vs_eager']:16.2f}")
    not_correct = [r for r in rows if r["covered"] and not r.get("correct")]
    for r in not_correct:
        print(f"not correct: {r['id']}: {r['outcome']}: {r.get('reason')}")
    device = next((r.get("device_name") for r in rows if r.get("device_name")), args.device)
    print(f"\n{device}, shrink {args.shrink}; a task is covered when a plan takes all its ops")
    (results_dir() / "synth_suite.json").write_text(json.dumps(
        {"device": device, "shrink": args.shrink, "summary": summary, "tasks": rows},
        indent=2) + "\n")
    return 0 if not not_correct else 1


if __name__ == "__main__":
    sys.exit(main())
