"""Shared by the benchmark scripts: finding the binary, making candidate variants, running eval."""
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "scale_bias_relu"
TASK = EXAMPLE / "scale_bias_relu.py"


def binary() -> str:
    return os.environ.get("CUDA_AGENT_BIN", str(ROOT / "build" / "cuda-agent"))


def geomean(values: list[float]) -> float:
    """The geometric mean, NaN for no values."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def suite_tasks(suite: Path, levels: list[str], only: list[str]) -> list[Path]:
    """The task files of suite's levels, or, with only ("level/name" ids), those in that order;
    an id the suite lacks is an error."""
    tasks = [t for level in levels for t in sorted((suite / level).glob("*.py"))]
    if not only:
        return tasks
    by_id = {f"{t.parent.name}/{t.stem}": t for t in tasks}
    unknown = [i for i in only if i not in by_id]
    if unknown:
        raise SystemExit(f"not in {suite} (levels {' '.join(levels)}): {' '.join(unknown)}")
    return [by_id[i] for i in only]


def results_dir() -> Path:
    """$OUT on the device machine, else bench/results."""
    out = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    return out


def scaled_task(folder: Path, rows: int) -> Path:
    """A copy of the example task with another row count (the feature count, and so the
    kernels' vector path, unchanged)."""
    source = TASK.read_text()
    if "rows = 4096" not in source:
        raise ValueError(f"{TASK} no longer sets rows = 4096")
    path = folder / TASK.name
    path.write_text(source.replace("rows = 4096", f"rows = {rows}"))
    return path


def variant(device: str, dst: Path, edits: list[tuple[str, str, str]]) -> Path:
    """A copy of the example's candidate for device with edits applied: (file, old, new), where
    file is relative to the candidate folder. Each old text must be present."""
    dst.mkdir(parents=True)
    shutil.copy(EXAMPLE / "model_new.py", dst / "model_new.py")
    shutil.copytree(EXAMPLE / f"kernels_{device}", dst / "kernels")
    for file, old, new in edits:
        path = dst / file
        text = path.read_text()
        if old not in text:
            raise ValueError(f"{old!r} is not in {path}")
        path.write_text(text.replace(old, new))
    return dst


def run_eval(store: Path, cache: Path, candidate: Path, device: str, *extra: str,
             task: Path = TASK, env: dict | None = None) -> tuple[dict, float]:
    """Evaluates candidate (with env added to the environment); returns the JSON record and the
    command's wall time in seconds."""
    command = [binary(), "--store", str(store), "eval", "--device", device, "--json",
               "--cache-dir", str(cache), "--task", str(task),
               "--candidate", str(candidate / "model_new.py"),
               "--kernels", str(candidate / "kernels"), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, **env} if env else None)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout), wall


def write_json(name: str, payload: dict) -> Path:
    path = results_dir() / name
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def build_candidate(task: Path, work: Path, arch: str) -> tuple[Path, Path]:
    """The synthesizer's model_new.py and kernels/ for task (`optimize --stage compile`, no
    tuning) in work/episode, built with nvcc into work/libkernels.so."""
    workspace = work / "episode"
    made = subprocess.run([binary(), "optimize", str(task), "--device", "cuda", "--workspace",
                           str(workspace), "--stage", "compile", "--tune", "off", "--json"],
                          text=True, capture_output=True)
    if made.returncode != 0:
        raise SystemExit(f"the synthesizer wrote no candidate: {made.stderr[-2000:]}")
    lib = work / "libkernels.so"
    sources = sorted(str(p) for p in (workspace / "kernels").glob("*.cu"))
    built = subprocess.run(["nvcc", "-O3", "-std=c++17", f"-arch={arch}", "-shared",
                            "-Xcompiler", "-fPIC", "-o", str(lib), *sources],
                           text=True, capture_output=True)
    if built.returncode != 0:
        raise SystemExit(f"nvcc failed: {built.stderr[-2000:]}")
    return workspace, lib
