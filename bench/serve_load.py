"""What `cuda-agent serve` costs and gives a trainer: the latency of one evaluation through the
service beside `cuda-agent eval` run directly on the same candidate, store and build cache, and
the throughput of many requests at once over the service's slots, all in one run.

    python3 bench/serve_load.py [--device cuda] [--requests 16] [--jobs 2]   # serve_load.json

The candidate is the example (examples/scale_bias_relu) at --rows rows; the baselines are timed
once, before anything is measured.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import binary, print_table, run_eval, scaled_task, variant, write_json


def post(url: str, body: dict) -> tuple[dict, float]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url + "/v1/evaluate", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=3600) as response:
        answer = json.loads(response.read())
    return answer, time.perf_counter() - start


def summary(name: str, latencies: list[float], wall: float) -> dict:
    ordered = sorted(latencies)
    return {"name": name, "requests": len(latencies),
            "median_s": statistics.median(ordered),
            "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
            "wall_s": wall, "per_minute": 60 * len(latencies) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=0, help="default: 4096 on cuda, 256 on cpu")
    parser.add_argument("--requests", type=int, default=16, help="sent at once")
    parser.add_argument("--sequential", type=int, default=3, help="one at a time, each way")
    parser.add_argument("--jobs", type=int, default=2, help="the service's slots per device")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="serve-load-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # the direct evals' and the service's
    suite = work / "suite"
    suite.mkdir()
    (suite / "suite.json").write_text(json.dumps({"name": "serve-load"}))
    rows = args.rows or (4096 if args.device == "cuda" else 256)
    task = scaled_task(suite, rows)
    candidate = variant(args.device, work / "candidate", [])
    files = {"model_new.py": (candidate / "model_new.py").read_text()}
    for k in (candidate / "kernels").iterdir():
        files[f"kernels/{k.name}"] = k.read_text()
    store, cache = work / "store.sqlite", work / "cache" / "cuda-agent" / "build"

    record, cold = run_eval(store, cache, candidate, args.device, task=task)
    if record.get("outcome") != "pass":
        raise SystemExit(f"the example does not pass here: {record.get('reason')}")
    direct = []
    for _ in range(args.sequential):
        direct.append(run_eval(store, cache, candidate, args.device, task=task)[1])

    log = open(work / "serve.log", "w")
    service = subprocess.Popen([binary(), "--store", str(store), "serve", "--suite", str(suite),
                                "--port", "0", "--device", args.device, "--jobs", str(args.jobs),
                                "--queue", str(max(64, args.requests)),
                                "--work-dir", str(work / "serve")],
                               stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        url = f"http://127.0.0.1:{int(service.stdout.readline())}"
        body = {"task": task.stem, "files": files}
        one = []
        start = time.perf_counter()
        for _ in range(args.sequential):
            answer, seconds = post(url, body)
            assert answer["ok"] and answer["outcome"] == "pass", answer
            one.append(seconds)
        one_wall = time.perf_counter() - start
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.requests) as pool:
            answers = list(pool.map(lambda _: post(url, body), range(args.requests)))
        many_wall = time.perf_counter() - start
        assert all(a["ok"] and a["outcome"] == "pass" for a, _ in answers)
        assert len({a["result"]["id"] for a, _ in answers}) == args.requests
    finally:
        service.send_signal(2)
        service.wait(timeout=120)
        log.close()

    rows_out = [summary("eval, directly, one at a time", direct, sum(direct)),
                summary("serve, one at a time", one, one_wall),
                summary(f"serve, {args.requests} at once, {args.jobs} slot(s)",
                        [s for _, s in answers], many_wall)]
    print(f"{args.device}: example at {rows} rows; first evaluation (baselines timed) {cold:.1f} s")
    print_table(["how", "requests", "median s", "p90 s", "wall s", "per minute"],
                [[r["name"], r["requests"], f"{r['median_s']:.2f}", f"{r['p90_s']:.2f}",
                  f"{r['wall_s']:.1f}", f"{r['per_minute']:.1f}"] for r in rows_out])
    overhead = rows_out[1]["median_s"] - rows_out[0]["median_s"]
    print(f"service overhead per evaluation (median, one at a time): {overhead:+.2f} s")
    path = write_json("serve_load.json", {"device": args.device, "rows": rows, "jobs": args.jobs,
                                          "first_eval_s": cold, "rows_measured": rows_out,
                                          "overhead_s": overhead})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
