"""Where an evaluation's time goes, from the evaluations a run store holds: per harness script,
the median seconds of start-up, work and each step of the work (drawing inputs, writing bundles,
the calls, the comparisons), and per task the wall time of verify and profile, which is what the
device's lock is held for during a bench.

    python3 bench/eval_steps.py STORE [--task GLOB] [--json NAME]   # writes NAME (eval_steps.json)
"""
import argparse
import fnmatch
import json
import sqlite3
import statistics
from collections import defaultdict

from common import print_table, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", help="a run store (sqlite)")
    parser.add_argument("--task", default="*", help="task ids to include (fnmatch pattern)")
    parser.add_argument("--json", default="eval_steps.json", help="file name under bench/results")
    args = parser.parse_args()

    steps: dict[tuple[str, str], list[float]] = defaultdict(list)
    tasks = []
    db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    for task, result in db.execute("SELECT task_id, result FROM evaluations ORDER BY id"):
        if not fnmatch.fnmatch(task, args.task):
            continue
        record = json.loads(result)
        stages = record.get("stages", {})
        seconds = {name: round(stages.get(name, {}).get("seconds") or 0.0, 2)
                   for name in ("compile", "verify", "profile")}
        tasks.append({"task": task, "outcome": record.get("outcome"), **seconds,
                      "device_locked": round(seconds["verify"] + seconds["profile"], 2)})
        for process in record.get("sandbox", {}).get("processes", []):
            phases = process.get("phases") or {}
            script = process.get("script", "?")
            for name in ("startup_s", "before_release_s", "while_waiting_s", "work_s"):
                if name in phases:
                    steps[(script, name.removesuffix("_s"))].append(phases[name])
            for name, value in (phases.get("steps") or {}).items():
                steps[(script, f"  {name}")].append(value)

    rows = [[script, name, len(values), f"{statistics.median(values):.2f}",
             f"{max(values):.2f}"] for (script, name), values in steps.items()]
    print_table(["script", "phase / step", "n", "median s", "max s"], rows)
    print()
    print_table(["task", "outcome", "compile s", "verify s", "profile s", "verify+profile s"],
                [[t["task"], t["outcome"], t["compile"], t["verify"], t["profile"],
                  t["device_locked"]] for t in tasks])
    locked = [t["device_locked"] for t in tasks]
    if locked:
        print(f"\nverify+profile per evaluation: median {statistics.median(locked):.1f} s, "
              f"total {sum(locked):.0f} s over {len(locked)}")
    path = write_json(args.json, {
        "store": args.store, "tasks": tasks,
        "steps": [{"script": s, "step": n.strip(), "n": len(v), "median_s": statistics.median(v),
                   "max_s": max(v)} for (s, n), v in steps.items()]})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
