"""What moving a full-size task's tensors costs on the device machine, per GiB: device to host into
fresh and into touched memory, through a pinned staging buffer (what the harness's
common.host_copy does); torch.save and torch.load back to the device, and a tensor written apart
from its bundle (common.Spill, with write(); beside it, through a shared mapping of the file) and
mapped back, in /tmp and /dev/shm; the comparison of check.py with the candidate's output on the
host and on the device. The evaluator moves tens of gigabytes per evaluation at full size, with
the GPU locked.

    python3 bench/host_copies.py [--gib 1]   # cuda only; writes host_copies.json
"""
import argparse
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import torch

# The harness's check.py and common.py, ahead of this folder's common.py, which is loaded by path.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness"))
import check  # noqa: E402
import common as harness  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_common", HERE / "common.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def best_of(repeats: int, fn) -> float:
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="tensor size in GiB (float32)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("host_copies.py needs a CUDA device")
    torch.set_grad_enabled(False)
    n = int(args.gib * (1 << 30)) // 4
    device = torch.randn(n, device="cuda")  # never zeros: a copy of zeros can be elided
    touched = torch.empty(n)
    touched.fill_(1.0)
    stage = torch.empty(harness.STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
    rows: list[tuple[str, float]] = []

    def measure(label: str, fn, repeats: int = args.repeats) -> None:
        rows.append((label, best_of(repeats, fn) / args.gib))

    measure("device -> fresh host memory (.cpu())", lambda: device.cpu())
    measure("device -> touched host memory", lambda: touched.copy_(device))
    measure("pinned allocation", lambda: torch.empty(n, pin_memory=True), repeats=1)
    pinned = torch.empty(n, pin_memory=True)
    measure("device -> pinned memory", lambda: pinned.copy_(device))
    measure("device -> fresh host memory, staged (host_copy)",
            lambda: harness.staged_copy(device, stage))
    measure("host memory, fresh (clone)", lambda: touched.clone())
    for folder in ("/tmp", "/dev/shm"):
        path = Path(folder) / f"host_copies-{os.getpid()}"
        measure(f"torch.save of a host tensor, {folder}", lambda: torch.save([touched], path))
        measure(f"torch.load (mmap) -> device, {folder}", lambda: torch.load(
            path, map_location="cpu", mmap=True, weights_only=True)[0].to("cuda"))
        path.unlink()
        bundle = str(path) + ".pt"

        def spill() -> None:
            harness.save_bundle([harness.Spill(bundle)([device])], bundle)

        measure(f"device -> raw file through the stage, write() (Spill), {folder}", spill)

        def through_mapping() -> None:
            """What Spill did first: the stage copied into a shared mapping of the file."""
            source = device.view(torch.uint8)
            with open(path, "wb") as f:
                f.truncate(source.numel())
            target = torch.from_file(str(path), shared=True, size=source.numel(),
                                     dtype=torch.uint8)
            for start in range(0, source.numel(), stage.numel()):
                length = min(stage.numel(), source.numel() - start)
                stage[:length].copy_(source[start:start + length])
                target[start:start + length].copy_(stage[:length])
            del target
            path.unlink()

        measure(f"device -> raw file through the stage, shared mapping, {folder}",
                through_mapping)
        measure(f"raw file (load_bundle, mapped) -> device, {folder}",
                lambda: harness.load_bundle(bundle)[0][0].to("cuda"))
        os.remove(bundle)
        shutil.rmtree(harness.raw_folder(bundle))
    measure("check.compare_output, candidate's output on the host",
            lambda: check.compare_output(device, touched, 1e-2, 1e-2, "cuda"))
    on_device = touched.to("cuda")
    measure("check.compare_output, both on the device",
            lambda: check.compare_output(device, on_device, 1e-2, 1e-2, "cuda"))

    bench.print_table(["operation", "s per GiB"], [[label, f"{s:.3f}"] for label, s in rows])
    path = bench.write_json("host_copies.json", {
        "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
        "gib": args.gib, "cpu_threads": torch.get_num_threads(),
        "seconds_per_gib": {label: s for label, s in rows}})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
