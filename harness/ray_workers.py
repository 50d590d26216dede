"""Runs a bench's episodes on Ray actors: one actor per GPU (per device slot on the CPU), each
running a few episodes at once and giving them its device in turns through a lock file, as the
local bench does with its processes. Started by `cuda-agent bench --ray ADDRESS`, which owns
the run: it sends each episode's command as a JSON line on stdin and records the outputs this
adapter prints as JSON lines on stdout. The first line out says whether the actors were placed.

Every node must have cuda-agent, its harness and the suite at the same paths as the driver's."""

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In an episode's process before exec: SIGTERM when the actor's thread that started it ends,
    so that a stopped actor leaves no orphan running."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def say(record: dict, lock=threading.Lock()) -> None:
    with lock:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


class EpisodeWorker:
    """One device: runs `cuda-agent optimize` commands and returns what they printed."""

    def __init__(self, index: int, device: str) -> None:
        self.index = index
        self.device = device
        self.host = socket.gethostname()
        folder = os.path.join(tempfile.gettempdir(), f"cuda-agent-ray-{os.getuid()}")
        os.makedirs(folder, exist_ok=True)
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "") if device == "cuda" else ""
        self.lock = os.path.join(folder, f"{device}-{gpus or index}.lock")

    def describe(self) -> dict:
        return {"index": self.index, "host": self.host,
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "") if self.device == "cuda" else ""}

    def run(self, job: dict) -> dict:
        argv = list(job["argv"]) + ["--device-lock", self.lock]
        worker = f"ray actor {self.index} on {self.host}"
        if self.device == "cuda":
            worker += f" (gpu {os.environ.get('CUDA_VISIBLE_DEVICES', '?')})"
        result = {"id": job["id"], "worker": worker, "started": False, "exit_code": -1,
                  "timed_out": False, "wall_s": 0.0, "out": "", "err": ""}
        log = job.get("log") or os.devnull
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        start = time.monotonic()
        try:
            with open(log, "w") as err:
                process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err,
                                           stdin=subprocess.DEVNULL, start_new_session=True,
                                           preexec_fn=die_with_parent)
                result["started"] = True
                try:
                    out, _ = process.communicate(timeout=job.get("timeout_s", 3600))
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    out, _ = process.communicate()
                    result["timed_out"] = True
            result["exit_code"] = process.returncode
            result["out"] = out.decode("utf-8", "replace")
        except OSError as error:
            result["error"] = f"cannot run {argv[0]}: {error}"
        result["wall_s"] = time.monotonic() - start
        try:
            with open(log, errors="replace") as err:
                result["err"] = err.read()[-4000:]
        except OSError:
            pass
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="local",
                        help="a Ray cluster's address, 'auto' for the one this node is in, or "
                             "'local' to start one on this machine")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workers", type=int, default=0,
                        help="actors; 0: one per GPU of the cluster (cuda) or 1 (cpu)")
    parser.add_argument("--concurrency", type=int, default=2, help="episodes at once per actor")
    args = parser.parse_args()
    # Ray's own messages go to stderr, where the driver keeps a log of them.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        import ray
    except ImportError:
        sys.stdout = real_stdout
        say({"error": "Ray is not installed here (pip install ray)"})
        return 2
    try:
        if args.address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    except Exception as error:  # noqa: BLE001: Ray raises many kinds; each ends the same way
        sys.stdout = real_stdout
        say({"error": f"cannot reach the Ray cluster at {args.address}: {error}"})
        return 2
    sys.stdout = real_stdout
    workers = args.workers
    if workers <= 0:
        workers = int(ray.cluster_resources().get("GPU", 0)) if args.device == "cuda" else 1
    if workers <= 0:
        say({"error": "the Ray cluster has no GPU"})
        return 2
    # An actor reserves its GPU; episodes spawn their own processes, so no CPU is reserved.
    actor_class = ray.remote(num_cpus=0, num_gpus=1 if args.device == "cuda" else 0,
                             max_concurrency=args.concurrency)(EpisodeWorker)
    actors = [actor_class.remote(i, args.device) for i in range(workers)]
    try:
        placed = ray.get([a.describe.remote() for a in actors], timeout=300)
    except Exception as error:  # noqa: BLE001
        say({"error": f"the actors were not placed: {error}"})
        return 2
    say({"ready": True, "workers": workers, "slots": workers * args.concurrency,
         "devices": workers, "actors": placed})

    pending = {}
    lock = threading.Lock()
    done = threading.Event()

    def relay() -> None:
        while not (done.is_set() and not pending):
            with lock:
                refs = list(pending)
            if not refs:
                time.sleep(0.1)
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.5)
            for ref in ready:
                with lock:
                    job_id = pending.pop(ref)
                try:
                    say(ray.get(ref))
                except Exception as error:  # noqa: BLE001: an actor that died mid-episode
                    say({"id": job_id, "started": False, "error": f"the actor failed: {error}"})

    relayer = threading.Thread(target=relay, daemon=True)
    relayer.start()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        job = json.loads(line)
        actor = actors[job.get("slot", 0) % workers]
        with lock:
            pending[actor.run.remote(job)] = job["id"]
    # End of input: the driver has what it wanted, or was stopped. Episodes still running are
    # ended with their actors.
    done.set()
    with lock:
        pending.clear()
    for a in actors:
        ray.kill(a)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
