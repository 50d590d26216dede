"""What moving a full-size task's tensors costs on the device machine, per GiB: device to host into
fresh and into touched memory, through a pinned staging buffer (what the harness's common.host_copy
does); torch.save and torch.load back to the device, and a tensor written apart from its bundle
(common.Spill: write(), or in a tmpfs the file's pages allocated and a shared mapping of it; beside
them pwrite() from several stages on threads, and either into a file that exists already) and mapped
back (to the device by the driver, or through the pinned stage: common.upload; beside them pread()
on threads), in /tmp and /dev/shm; the comparison of check.py with the candidate's output on the
host and on the device. The evaluator moves tens of gigabytes per evaluation at full size, with the
GPU locked.

    python3 bench/host_copies.py [--gib 1]   # cuda only; writes host_copies.json
"""
import argparse
import importlib.util
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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


def best_of(repeats: int, fn, setup=None) -> float:
    best = float("inf")
    for _ in range(repeats):
        if setup is not None:
            setup()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


def threaded_write(device: torch.Tensor, path: str, stages: list, pool, truncate: bool = True):
    """device's bytes into path through stages in turn, each stage's write on a pool thread (on
    this one where pool is None) while the next stage fills."""
    source = device.view(torch.uint8)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0)
    fd = os.open(path, flags, 0o600)
    pending = [None] * len(stages)
    try:
        chunk = stages[0].numel()
        for i, start in enumerate(range(0, source.numel(), chunk)):
            j = i % len(stages)
            if pending[j] is not None:
                pending[j].result()
            length = min(chunk, source.numel() - start)
            stages[j][:length].copy_(source[start:start + length])
            data = memoryview(stages[j][:length].numpy())
            if pool is None:
                _pwrite_all(fd, data, start)
            else:
                pending[j] = pool.submit(_pwrite_all, fd, data, start)
        for p in pending:
            if p is not None:
                p.result()
    finally:
        os.close(fd)


def mapping_write(device: torch.Tensor, path: str, stage: torch.Tensor) -> None:
    """device's bytes into path (made or kept at their size) through a shared mapping of it, a
    stage-full at a time; torch's copy into the mapping runs on its intra-op threads."""
    source = device.view(torch.uint8)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size != source.numel():
            os.ftruncate(fd, source.numel())
    finally:
        os.close(fd)
    target = torch.from_file(path, shared=True, size=source.numel(), dtype=torch.uint8)
    harness.copy_through(source, target, stage)


def threaded_read(path: str, numel: int, stages: list, pool) -> torch.Tensor:
    """path's float32 values on the device, read into stages by pool threads in turn and moved."""
    result = torch.empty(numel, device="cuda").view(torch.uint8)
    fd = os.open(path, os.O_RDONLY)
    chunk = stages[0].numel()
    starts = list(range(0, result.numel(), chunk))

    def read(i: int) -> int:
        j = i % len(stages)
        length = min(chunk, result.numel() - starts[i])
        view = memoryview(stages[j][:length].numpy())
        done = 0
        while done < length:
            done += os.preadv(fd, [view[done:]], starts[i] + done)
        return length

    try:
        pending = {i: pool.submit(read, i) for i in range(min(len(stages), len(starts)))}
        for i, start in enumerate(starts):
            length = pending.pop(i).result()
            result[start:start + length].copy_(stages[i % len(stages)][:length])
            if i + len(stages) < len(starts):
                pending[i + len(stages)] = pool.submit(read, i + len(stages))
    finally:
        os.close(fd)
    return result


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

    def measure(label: str, fn, repeats: int = args.repeats, setup=None) -> None:
        rows.append((label, best_of(repeats, fn, setup) / args.gib))

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

        measure(f"device -> raw file through the stage (Spill: the pages allocated, then a "
                f"mapping, in a tmpfs; write() elsewhere), {folder}", spill,
                setup=lambda: shutil.rmtree(harness.raw_folder(bundle), ignore_errors=True))
        measure(f"raw file (load_bundle, mapped) -> device, {folder}",
                lambda: harness.load_bundle(bundle)[0][0].to("cuda"))
        measure(f"raw file (load_bundle, mapped) -> device through the stage (upload), "
                f"{folder}", lambda: harness.upload(harness.load_bundle(bundle)[0][0], "cuda"))
        raw = harness.raw_folder(bundle) + "/0.raw"
        for threads in (2, 4, 8):
            stages = [torch.empty(harness.STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
                      for _ in range(threads)]
            with ThreadPoolExecutor(threads) as pool:
                measure(f"device -> raw file, {threads} stages and threads, pwrite(), {folder}",
                        lambda: threaded_write(device, str(path), stages, pool),
                        setup=lambda: path.unlink(missing_ok=True))
                measure(f"device -> existing raw file, {threads} stages and threads, {folder}",
                        lambda: threaded_write(device, raw, stages, pool, truncate=False))
                measure(f"raw file -> device, {threads} stages and threads, pread(), {folder}",
                        lambda: threaded_read(raw, device.numel(), stages, pool))
        measure(f"device -> existing raw file, one stage, write(), {folder}",
                lambda: threaded_write(device, raw, [stage], None, truncate=False))
        for threads in (1, 4, torch.get_num_threads()):
            def mapped(existing: bool, threads: int = threads) -> None:
                before = torch.get_num_threads()
                torch.set_num_threads(threads)
                try:
                    mapping_write(device, raw if existing else str(path), stage)
                finally:
                    torch.set_num_threads(before)
            measure(f"device -> raw file, shared mapping, {threads} copy threads, {folder}",
                    lambda: mapped(False), setup=lambda: path.unlink(missing_ok=True))
            measure(f"device -> existing raw file, shared mapping, {threads} copy threads, "
                    f"{folder}", lambda: mapped(True))
        path.unlink(missing_ok=True)
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
