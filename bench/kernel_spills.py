"""Registers and local-memory spills of every kernel the synthesizer writes for a suite, by
ptxas (no GPU needed): each task's CUDA candidate is written with `optimize --stage compile
--device cuda` at full size, each kernels/*.cu compiled with `nvcc -Xptxas -v` for --arch, and
every instantiation (each launch configuration's template arguments, 32- and 64-bit indices)
that spills is listed with its bytes. A spill of a few bytes costs little; one of a kilobyte a
thread made the unrolled GRU's gate kernel seven times slower than its twin without it (34
against 4.6 us a step on an H200), which no CPU test sees.

    python3 bench/kernel_spills.py [--levels level2 level3] [--only level3/010_gru_unrolled ...]
    # prints a table, writes kernel_spills.json
"""
import argparse
import concurrent.futures
import re
import subprocess
import tempfile
from pathlib import Path

from common import ROOT, binary, print_table, suite_tasks, write_json

ENTRY = re.compile(r"Compiling entry function '(\w+)'")
SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")


def ptxas_entries(log: str) -> list[dict]:
    """Each entry function of `nvcc -Xptxas -v`'s log: its mangled name, registers and spill
    bytes (stores, loads)."""
    entries = []
    for line in log.splitlines():
        if m := ENTRY.search(line):
            entries.append({"entry": m.group(1), "registers": 0, "spill_stores": 0,
                            "spill_loads": 0})
        elif entries and (m := SPILLS.search(line)):
            entries[-1]["spill_stores"], entries[-1]["spill_loads"] = map(int, m.groups())
        elif entries and (m := REGISTERS.search(line)):
            entries[-1]["registers"] = int(m.group(1))
    return entries


def one_task(task: Path, work: Path, arch: str) -> dict:
    name = f"{task.parent.name}/{task.stem}"
    workspace = work / task.stem
    made = subprocess.run([binary(), "optimize", str(task), "--device", "cuda", "--stage",
                           "compile", "--tune", "off", "--workspace", str(workspace)],
                          capture_output=True, text=True)
    if made.returncode != 0 and not (workspace / "kernels").is_dir():
        return {"task": name, "kernels": None}
    kernels = {}
    for source in sorted((workspace / "kernels").glob("*.cu")):
        built = subprocess.run(["nvcc", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-c",
                                str(source), "-o", str(work / f"{task.stem}.o")],
                               capture_output=True, text=True)
        if built.returncode != 0:
            kernels[source.name] = {"error": built.stderr[-2000:]}
            continue
        kernels[source.name] = {"entries": ptxas_entries(built.stderr)}
    return {"task": name, "kernels": kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, default=ROOT / "tasks")
    parser.add_argument("--levels", nargs="*", default=["level1", "level2", "level3"])
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    tasks = suite_tasks(args.suite, args.levels, args.only)
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda t: one_task(t, Path(tmp), args.arch), tasks))
    rows = []
    for result in results:
        if result["kernels"] is None:
            rows.append([result["task"], "no candidate", "", "", ""])
            continue
        for file, kernel in result["kernels"].items():
            if "error" in kernel:
                rows.append([result["task"], file, "nvcc failed", "", ""])
                continue
            spilling = [e for e in kernel["entries"] if e["spill_stores"] or e["spill_loads"]]
            worst = max(spilling, key=lambda e: e["spill_stores"], default=None)
            rows.append([result["task"], file, f"{len(spilling)} of {len(kernel['entries'])}",
                         worst["spill_stores"] if worst else 0,
                         worst["entry"][:60] if worst else ""])
    print_table(["task", "kernel", "instantiations spilling", "most bytes stored",
                 "that instantiation"], rows)
    print(f"wrote {write_json('kernel_spills.json', {'arch': args.arch, 'tasks': results})}")


if __name__ == "__main__":
    main()
