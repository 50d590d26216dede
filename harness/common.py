"""What every harness script shares: argument and report handling, task and candidate loading,
tensor bundles and device helpers. PROTOCOL.md is the contract these implement."""

import argparse
import contextlib
import fcntl
import gc
import importlib.util
import json
import math
import os
import platform
import random
import re
import shutil
import stat
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

import torch

# OpenMP threads of a candidate's CPU kernels sleep as soon as their parallel region ends, rather
# than spinning for milliseconds: a thread still on the CPU after forward returned is then one
# that is working (watch.py, T2). Read by libgomp when the kernel library loads it.
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

from guard import DispatchGuard
from watch import PRECISIONS, Watch, pin_precision

TASK_NAMES = ("Model", "get_inputs", "get_init_inputs")
TASK_MODULE = "_cuda_agent_task"
KERNEL_LIB_ENV = "CUDA_AGENT_KERNEL_LIB"
TRACEBACK_LINES = 40


class Failure(Exception):
    """An outcome the report states as ok=false with this error_kind and message."""

    kind = "internal"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class TaskError(Failure):
    kind = "task"


class UsageError(Failure):
    kind = "usage"


# --- arguments and reports ---------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def make_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the options every script takes (--device, --report); its errors raise
    UsageError, so they end up in the report."""
    parser = _Parser(description=description)
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--report", required=True, help="where the JSON report is written")
    parser.add_argument("--shrink", type=int, default=1,
                        help="divide each of the task's SCALABLE_SIZES constants by this "
                             "(default %(default)s: full size)")
    parser.add_argument("--wait-for", help="start up, then wait until this file exists: 'go' "
                        "proceeds, anything else ends the script with error_kind 'aborted'")
    return parser


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """--precision, which only the scripts that run the candidate take: the trusted scripts and
    the baselines always run in full fp32."""
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32 (default) or tf32: cuBLAS and cuDNN may take the candidate's "
                             "fp32 GEMMs and convolutions in TF32")


RELEASE_POLL_S = 0.005


def _wait_for_file(path: str) -> str:
    while not os.path.exists(path):
        time.sleep(RELEASE_POLL_S)
    with open(path) as f:
        return f.read().strip()


def announce_waiting(gate: str) -> None:
    """GATE.waiting: the start-up is over (torch imported, the device set up), so that it
    overlaps the step before this one; nothing of the task's or the candidate's is loaded yet.
    The evaluator runs candidate code only once every step of the evaluation has said so."""
    write_text_atomic(f"{gate}.waiting", "waiting")


def wait_for_release(gate: str) -> None:
    """Blocks until the evaluator writes the gate file."""
    word = _wait_for_file(gate)
    if word != "go":
        raise Failure(f"the evaluator ended this step before it began ({word})", kind="aborted")


def wait_for_secret(gate: str) -> int:
    """timing.py's second gate: announces GATE.ready, then waits for GATE.time, where the
    evaluator writes the secret of the timed calls (hex) and starts its own clock."""
    write_text_atomic(f"{gate}.ready", "ready")
    word = _wait_for_file(f"{gate}.time")
    try:
        return int(word, 16)
    except ValueError:
        raise Failure(f"the evaluator ended the timed calls before they began ({word})",
                      kind="aborted") from None


def write_text_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def gpu_lock(path: str | None):
    """The GPU to this process alone among those that lock the same file (an exclusive flock on
    path; no lock where path is empty). The lock goes with the process, so one that crashes
    holding it frees it."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def step(report: dict, name: str):
    """Adds the seconds the block takes to report["phases"]["steps"][name]: where a script's
    work goes (drawing inputs, writing bundles, the calls, the comparison), per process in the
    evaluation record."""
    mark = time.perf_counter()
    try:
        yield
    finally:
        steps = report.setdefault("phases", {}).setdefault("steps", {})
        steps[name] = round(steps.get(name, 0.0) + time.perf_counter() - mark, 3)


def _report_path(argv: list[str]) -> str | None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--report")
    known, _ = pre.parse_known_args(argv)
    return known.report


def collect_garbage_again() -> None:
    """The collector back on after a script's imports (startup.py turned it off), the objects
    they made frozen: they live as long as the process, and collections need not walk them."""
    gc.freeze()
    gc.enable()


def run_script(parser: argparse.ArgumentParser, main: Callable[[Any, dict], None],
               before_release: Callable[[Any], None] | None = None,
               while_waiting: Callable[[Any], None] | None = None) -> int:
    """Parses arguments, runs main(args, report), writes the report whatever happens, and ends
    the process (returning only for --help and a missing --report). before_release(args), where
    given, runs with the start-up, before a gated script says it is waiting: imports of its own,
    nothing of the task's or the candidate's. while_waiting(args) runs after that, before the
    wait for the release: work the evaluator need not wait for before candidate code runs
    elsewhere, only before this step's own work begins."""
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        parser.print_help()
        return 0
    report_path = _report_path(argv)
    if report_path is None:
        print(f"{parser.prog}: --report is required", file=sys.stderr)
        return 2
    report_path = os.path.abspath(report_path)  # the candidate's loader changes the cwd
    collect_garbage_again()
    report: dict[str, Any] = {"ok": False}
    # Where a process's time goes: interpreter and imports, device set-up, waiting for its
    # release, and its own work. The evaluator shows these per process.
    phases = report["phases"] = {"startup_s": round(_process_age(), 3)}
    try:
        args = parser.parse_args(argv)
        # Full fp32 unless the evaluator asked a candidate process for TF32 (--precision).
        pin_precision(getattr(args, "precision", "fp32"))
        if hasattr(args, "precision"):
            report["precision"] = args.precision
        torch.set_grad_enabled(False)  # the harness only ever runs forward
        if args.device == "cuda" and not torch.cuda.is_available():
            raise UsageError("--device cuda was asked for but torch sees no CUDA device")
        mark = time.perf_counter()
        if args.device == "cuda":
            torch.empty(1, device="cuda")  # the context, before any waiting or timing
        phases["device_s"] = round(time.perf_counter() - mark, 3)
        if before_release is not None:
            mark = time.perf_counter()
            before_release(args)
            phases["before_release_s"] = round(time.perf_counter() - mark, 3)
        if args.wait_for:
            announce_waiting(args.wait_for)
        if while_waiting is not None:
            mark = time.perf_counter()
            while_waiting(args)
            phases["while_waiting_s"] = round(time.perf_counter() - mark, 3)
        if args.wait_for:
            mark = time.perf_counter()
            wait_for_release(args.wait_for)
            phases["waited_s"] = round(time.perf_counter() - mark, 3)
        mark = time.perf_counter()
        try:
            main(args, report)
        finally:
            phases["work_s"] = round(time.perf_counter() - mark, 3)
        report["ok"] = True
    except BaseException as error:  # candidate code can raise anything, SystemExit included
        report.update(failure_fields(error))
    write_report(report_path, report)
    # The report is all the evaluator reads: skip interpreter and CUDA teardown (tenths of a
    # second on the critical path of every evaluation), and any exit hook candidate code left.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _process_age() -> float:
    """Seconds since this process started (from /proc; 0 where that cannot be read)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def failure_fields(error: BaseException) -> dict[str, Any]:
    """ok/error_kind/error/traceback for a caught exception: a Failure speaks for itself and
    carries the traceback of its cause; anything else is an internal error."""
    if isinstance(error, Failure):
        fields: dict[str, Any] = {"ok": False, "error_kind": error.kind, "error": str(error)}
        cause = error.__cause__
    else:
        fields = {"ok": False, "error_kind": "internal",
                  "error": f"{type(error).__name__}: {error}"}
        cause = error
    if cause is not None:
        lines = "".join(traceback.format_exception(cause)).splitlines()
        fields["traceback"] = "\n".join(lines[-TRACEBACK_LINES:])
    return fields


def jsonable(value: Any) -> Any:
    """Strict JSON: non-finite floats become "nan", "inf" or "-inf"; unknown objects their repr."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return repr(value)


def write_report(path: str, report: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(jsonable(report), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


# --- tasks and candidates ----------------------------------------------------------------------


def load_task(path: str) -> types.ModuleType:
    """Imports a KernelBench task file under a private name, its folder first on sys.path."""
    file = Path(path).resolve()
    if not file.is_file():
        raise TaskError(f"task file {file} does not exist")
    sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(TASK_MODULE, file)
    if spec is None or spec.loader is None:
        raise TaskError(f"task file {file} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[TASK_MODULE] = module
    # The bytecode folder outlives the evaluation and the task copy does not: no bytecode for
    # the task or what it imports from its folder (libraries cached already are still read).
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise TaskError(f"importing task file {file} failed: {type(error).__name__}: {error}") \
            from error
    finally:
        sys.dont_write_bytecode = writes_bytecode
    missing = [name for name in TASK_NAMES if not callable(getattr(module, name, None))]
    if missing:
        raise TaskError(f"task file {file} does not define {', '.join(missing)} at top level")
    return module


SCALABLE_SIZES = "SCALABLE_SIZES"


def shrink_task(task: types.ModuleType, factor: int) -> dict[str, list[int]]:
    """Divides each module-level constant the task names in SCALABLE_SIZES by factor (at least
    1 is left), for a smaller run of the same computation (tasks/README.md). Returns
    {name: [full, used]} for each ({} for a task that names none)."""
    if factor < 1:
        raise UsageError(f"--shrink must be at least 1, not {factor}")
    names = getattr(task, SCALABLE_SIZES, ())
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TaskError(f"{SCALABLE_SIZES} must be a tuple of names of module-level integer "
                        f"constants, not {names!r}")
    sizes: dict[str, list[int]] = {}
    for name in names:
        full = getattr(task, name, None)
        if not isinstance(full, int) or isinstance(full, bool):
            raise TaskError(f"{SCALABLE_SIZES} names {name!r}, which is not a module-level "
                            "integer constant")
        used = max(1, full // factor)
        setattr(task, name, used)
        sizes[name] = [full, used]
    return sizes


def load_candidate(workspace: str, kernel_lib: str) -> type:
    """Imports ModelNew from WORKSPACE/model_new.py as the candidate sees it: the workspace first
    on sys.path, cwd there, and CUDA_AGENT_KERNEL_LIB naming the compiled kernel library."""
    folder = Path(workspace).resolve()
    os.environ[KERNEL_LIB_ENV] = str(Path(kernel_lib).resolve()) if kernel_lib else ""
    sys.path.insert(0, str(folder))
    os.chdir(folder)
    source = folder / "model_new.py"
    if not source.is_file():
        raise Failure(f"{source} does not exist", "load")
    spec = importlib.util.spec_from_file_location("model_new", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        raise Failure(f"importing {source} failed: {type(error).__name__}: {error}", "load") \
            from error
    cls = getattr(module, "ModelNew", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise Failure(f"{source} does not define a top-level class ModelNew(nn.Module)", "load")
    return cls


def model_base(cls: type) -> type | None:
    """The class named Model among cls's bases, if any (rule inherits_model): the task's Model,
    whether imported from the workspace's model.py or copied there under its name."""
    return next((base for base in cls.__mro__[1:] if base.__name__ == "Model"), None)


def torch_compile(fn: Callable, device: str) -> Callable:
    """torch.compile(fn), where on the cpu device inductor takes the vector instruction sets its
    C++ may use from the CPU's flags alone. Left to itself it also probes each set the flags name
    (and AVX-512's BF16, VNNI and AMX extensions) by building a test library and loading it in a
    fresh Python that imports torch: about ten seconds of CPU time in every process that
    compiles, where the compile itself may take two. The flags are what inductor reads from
    /proc/cpuinfo first either way, and the compiler is the g++ that builds the candidates'
    kernels with -march=native, so the sets chosen are the same."""
    if device == "cpu":
        import torch._inductor.config as inductor_config
        from torch._inductor import cpu_vec_isa

        inductor_config.cpp.vec_isa_ok = True
        cpu_vec_isa.VecISA.check_build = lambda self, code: True  # the extensions' probes
    return torch.compile(fn)


def build_model(cls: type, init: dict, init_seed: int, device: str) -> tuple[torch.nn.Module, str]:
    """cls(*init_inputs) after torch.manual_seed(init_seed), with the reference's state_dict
    loaded when its keys and shapes match exactly. Returns the model and "loaded" or "seeded"."""
    torch.manual_seed(init_seed)
    model = cls(*init["init_inputs"])
    reference: dict[str, torch.Tensor] = init["state_dict"]
    own = model.state_dict()
    same = own.keys() == reference.keys() and all(
        tuple(own[k].shape) == tuple(reference[k].shape) for k in own)
    if same:
        model.load_state_dict(reference)
    return model.to(device), "loaded" if same else "seeded"


def load_candidate_model(workspace: str, kernel_lib: str, init: dict, init_seed: int, device: str,
                         report: dict) -> tuple[torch.nn.Module, DispatchGuard, Watch]:
    """Loads and builds ModelNew as run_candidate.py and timing.py both do, with the guard its
    calls run under and the watch that checks the process after them; report gets
    "violations" (the guard's and the watch's), "library_ops" and "weights"."""
    guard = DispatchGuard()
    # The device's context made first, so that the driver's own threads are already there when
    # the watch takes its first look at the process's threads (watch.DRIVER_THREADS).
    torch.empty(1, device=device)
    watch = Watch(device, guard.violations)  # before any candidate code runs
    report["violations"] = guard.violations
    report["library_ops"] = guard.library_ops
    cls = load_candidate(workspace, kernel_lib)
    base = model_base(cls)
    if base is not None:
        detail = (f"ModelNew derives from {base.__module__}.{base.__qualname__}: it must implement "
                  "forward itself, not subclass the task's Model")
        guard.violations.append({"rule": "inherits_model", "detail": detail})
        raise Failure(detail, "violation")
    try:
        model, report["weights"] = build_model(cls, init, init_seed, device)
    except BaseException as error:
        raise Failure(f"constructing ModelNew failed: {type(error).__name__}: {error}", "load") \
            from error
    watch.check("while model_new.py was imported and ModelNew built")
    if guard.violations:
        raise _violation(guard)
    return model, guard, watch


def call_candidate(model: torch.nn.Module, inputs: list, guard: DispatchGuard,
                   device: str, guard_held: bool = False) -> list:
    """model(*inputs) inside the guard, then a device synchronize; returns the outputs as a list.
    A violation, even one the candidate caught, or an exception becomes a Failure. guard_held:
    the caller has entered the guard already (timing.py, so that pushing and popping the mode
    stays outside the timed region)."""
    try:
        if guard_held:
            output = model(*inputs)
        else:
            with guard:
                output = model(*inputs)
        synchronize(device)
    except BaseException as error:  # candidate code can raise anything, SystemExit included
        if guard.violations:
            raise _violation(guard) from error
        raise Failure(f"ModelNew.forward raised {type(error).__name__}: {error}", "exception") \
            from error
    if guard.violations:
        raise _violation(guard)
    return output_list(output)


# The tensors of the call being checked. A thread the candidate left working on them (T2) may
# still be writing when the checks find it: they stay allocated until the process ends with its
# report, so that the thread cannot crash the process first by writing to freed memory.
_checked_call: Any = None


def after_call(guard: DispatchGuard, watch: Watch, tensors: Any) -> None:
    """The checks after each candidate call, outside any timed region: no thread still working,
    nothing of the harness or torch patched, precision as pinned. tensors: the call's inputs
    and outputs, held while the checks run and for good when they fail."""
    global _checked_call
    _checked_call = tensors
    watch.check_threads_idle("after ModelNew.forward returned")
    watch.check("during ModelNew.forward")
    if guard.violations:
        raise _violation(guard)
    _checked_call = None


def _violation(guard: DispatchGuard) -> Failure:
    first = guard.violations[0]
    return Failure(f"rule {first['rule']} broken: {first['detail']}", "violation")


def check_output_types(outputs: list) -> None:
    """T3: a candidate's outputs must be exactly torch.Tensor, no subclass and no lazy object."""
    wrong = [type_name(o) for o in outputs if type(o) is not torch.Tensor]
    if wrong:
        raise Failure(f"ModelNew.forward returned {', '.join(wrong)}: it must return a "
                      "torch.Tensor or a tuple or list of them", "output")


# --- tensors -----------------------------------------------------------------------------------


def load_bundle(path: str) -> Any:
    """A bundle of save_bundle, with the tensors a Spill wrote apart mapped back in place of
    their markers. Memory-mapped: a full-size task's input sets are gigabytes each, and the
    pages a set occupies are the file's, read when the set is used, not a private copy."""
    value = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return _resolve_raw(value, raw_folder(os.path.abspath(path)))


def _skip_save_checksums() -> None:
    """torch.save without its CRC-32 of every record: the checksum costs more than the write
    (0.3 of 0.6 s a GiB), and guards against nothing here. A bundle is read once, by a process
    of the same evaluation, from a file no candidate process can write; a candidate's own
    bundle could carry whatever checksum it liked."""
    try:  # a submodule torch does not import by itself
        from torch.utils.serialization import config
    except ImportError:
        return
    if hasattr(config.save, "compute_crc32"):
        config.save.compute_crc32 = False


def save_bundle(value: Any, path: str) -> None:
    tmp = f"{path}.tmp"
    _skip_save_checksums()
    try:
        torch.save(value, tmp)
    except (OSError, RuntimeError) as error:
        # A full filesystem shows as a serializer error ("unexpected pos ..."): say how much room
        # there was, and where the run folders go.
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise _write_failed(path, error) from error
    os.replace(tmp, path)


def _write_failed(path: str, error: BaseException) -> "Failure":
    folder = os.path.dirname(os.path.abspath(path))
    free = shutil.disk_usage(folder).free / (1 << 30)
    return Failure(f"writing {os.path.basename(path)} failed with {free:.1f} GiB free in "
                   f"{folder} (the evaluator's run folders go in $TMPDIR, /tmp by default; a "
                   f"full-size evaluation writes tens of gigabytes there): "
                   f"{type(error).__name__}: {str(error).strip()[:300]}")


def identical(original: Any, after: Any) -> bool:
    """Whether after holds exactly original's value (NaN equal to NaN at the same place),
    compared on after's device (original is moved there one tensor at a time)."""
    if type(after) is not type(original):
        return False
    if not isinstance(original, torch.Tensor):
        return bool(after == original)
    if after.shape != original.shape or after.dtype != original.dtype:
        return False
    original = original.to(after.device)
    if original.is_floating_point() or original.is_complex():
        nan = original.isnan()
        if not torch.equal(nan, after.isnan()):
            return False
        return torch.equal(original.masked_fill(nan, 0), after.masked_fill(nan, 0))
    return torch.equal(original, after)


def to_device(values: list, device: str) -> list:
    """A fresh copy of each tensor on the device; other values as they are."""
    return [(upload(v, device) if v.device.type == "cpu" and device == "cuda"
             else v.to(device, copy=True)) if isinstance(v, torch.Tensor) else v for v in values]


def tensor_bytes(values: list) -> int:
    """The bytes the tensors among values hold."""
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def detached(values: list) -> list:
    """Each tensor detached, where it is; other values as they are."""
    return [v.detach() if isinstance(v, torch.Tensor) else v for v in values]


# A device tensor at least this large goes to the host through a pinned staging buffer: a copy
# into fresh pageable memory makes the driver fault in and pin each page as it goes (0.7 s a
# gigabyte on an H200 host), while a pinned buffer and a host-side copy take a seventh of that.
STAGED_COPY_MIN_BYTES = 16 << 20
STAGE_BYTES = 64 << 20
_stage: torch.Tensor | None = None


def _staged(tensor: torch.Tensor) -> bool:
    return (tensor.device.type == "cuda" and tensor.layout == torch.strided
            and not tensor.is_quantized and tensor_bytes([tensor]) >= STAGED_COPY_MIN_BYTES)


def _stage_buffer() -> torch.Tensor:
    global _stage
    if _stage is None:
        _stage = torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
    return _stage


def host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A detached copy of tensor in host memory, owned by the caller."""
    tensor = tensor.detach()
    if not _staged(tensor):
        return tensor.to("cpu", copy=True)
    return staged_copy(tensor, _stage_buffer())


def upload(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """tensor.to(device) (itself where it is there). A large contiguous host tensor goes to a cuda
    device through the pinned staging buffer, which torch fills on all its threads: the pages of
    a mapped raw file fault in in parallel, where the driver's copy from pageable memory takes
    them on one thread (0.18 s a GiB from the GPU machine's /dev/shm, bench/host_copies.py)."""
    if (device != "cuda" or tensor.device.type != "cpu" or not tensor.is_contiguous()
            or tensor.layout != torch.strided or tensor.is_quantized or tensor.is_conj()
            or tensor.is_neg() or tensor_bytes([tensor]) < STAGED_COPY_MIN_BYTES):
        return tensor.to(device)
    return staged_upload(tensor, _stage_buffer(), device)


def staged_upload(tensor: torch.Tensor, stage: torch.Tensor, device: str) -> torch.Tensor:
    """A contiguous host tensor's values in a new tensor on device, moved through stage (a
    uint8 buffer) a stage-full of bytes at a time."""
    result = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
    copy_through(tensor.reshape(-1).view(torch.uint8), result.reshape(-1).view(torch.uint8),
                 stage)
    return result


def _flat_bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)


def _through_stage(source: torch.Tensor, stage: torch.Tensor):
    """(offset, the filled part of stage) for each stage-full of source's bytes (source: a flat
    uint8 tensor, on the device or the host; stage: a pinned uint8 buffer), copied in before it
    is yielded."""
    size, chunk = source.numel(), stage.numel()
    for start in range(0, size, chunk):
        length = min(chunk, size - start)
        stage[:length].copy_(source[start:start + length])
        yield start, stage[:length]


def copy_through(source: torch.Tensor, target: torch.Tensor, stage: torch.Tensor) -> None:
    """source's bytes into target's (flat uint8 tensors: one on the device, the other on the
    host, fresh memory or a file's mapping), a stage-full at a time. Each copy between the
    stage and the device waits for its end, so the stage is free again for the next one."""
    for start, staged in _through_stage(source, stage):
        target[start:start + staged.numel()].copy_(staged)


def staged_copy(tensor: torch.Tensor, stage: torch.Tensor) -> torch.Tensor:
    """tensor's values in a new contiguous host tensor, moved through stage (a uint8 buffer) a
    stage-full of bytes at a time."""
    result = torch.empty(tensor.shape, dtype=tensor.dtype)
    copy_through(_flat_bytes(tensor), result.reshape(-1).view(torch.uint8), stage)
    return result


# --- tensors written apart from their bundle ---------------------------------------------------

# A tensor at least this large leaves its bundle for a file of its own, written as soon as it
# exists straight from the pinned staging buffer (no host copy of its own, no pickling), and
# mapped by the reader. In a tmpfs (/dev/shm) the file's pages are allocated, then torch's copy
# fills a shared mapping of it on all its threads (into pages that exist, 0.084 s a GiB on the
# GPU machine; into new ones 0.26, as write()); elsewhere it is written with write(): a mapping
# of the GPU machine's ext4 /tmp cost 0.66-0.76 s a GiB (a fault and a block allocation per
# page), write() 0.28 (bench/host_copies.py).
RAW_MIN_BYTES = 16 << 20
RAW_KEY = "raw_tensor"
# The dtypes a raw file may hold, by the names it is written under.
RAW_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex128,
    torch.complex64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_RAW_NAME = re.compile(r"[0-9]{1,9}\.raw")


def raw_folder(bundle: str) -> str:
    """Where the tensors written apart from bundle go: a folder beside it, named after it."""
    return f"{bundle}.raw"


class Spill:
    """Writes the large tensors of values, one at a time as they are made, into raw files of
    bundle's raw_folder, and gives back what the bundle holds in their place: a small marker
    (file name, shape, dtype) that load_bundle maps back to a tensor. Smaller tensors come back
    as host copies, other values as they are. Non-contiguous tensors are written contiguous."""

    def __init__(self, bundle: str) -> None:
        self.folder = raw_folder(os.path.abspath(bundle))
        self.count = 0
        self.mapped = filesystem_type(os.path.dirname(self.folder)) == "tmpfs"

    def __call__(self, values: list) -> list:
        return [self.one(v) if isinstance(v, torch.Tensor) else v for v in values]

    def one(self, tensor: torch.Tensor) -> Any:
        tensor = tensor.detach()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if (tensor.layout != torch.strided or tensor.is_quantized or dtype not in RAW_DTYPES
                or tensor_bytes([tensor]) < RAW_MIN_BYTES):
            return host_copy(tensor)
        os.makedirs(self.folder, exist_ok=True)
        name = f"{self.count}.raw"
        self.count += 1
        path = os.path.join(self.folder, name)
        source = _flat_bytes(tensor)
        try:
            if self.mapped:
                _write_mapped(source, path, _staged(tensor))
            else:
                with open(path, "wb", buffering=0) as f:
                    if not _staged(tensor):
                        _write_all(f, memoryview(source.cpu().numpy()))
                    else:
                        for _, staged in _through_stage(source, _stage_buffer()):
                            _write_all(f, memoryview(staged.numpy()))
        except OSError as error:
            raise _write_failed(path, error) from error
        return {RAW_KEY: name, "shape": list(tensor.shape), "dtype": dtype}


def _write_mapped(source: torch.Tensor, path: str, staged: bool) -> None:
    """source's bytes (a flat uint8 tensor) into a new file at path through a shared mapping.
    The file's pages are allocated first: a tmpfs without room for them then says so here
    (ENOSPC), where a store through the mapping would kill the process with SIGBUS."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if source.numel():
            os.posix_fallocate(fd, 0, source.numel())
    finally:
        os.close(fd)
    target = torch.from_file(path, shared=True, size=source.numel(), dtype=torch.uint8)
    if staged:
        copy_through(source, target, _stage_buffer())
    else:
        target.copy_(source)


def filesystem_type(path: str, mounts: str = "/proc/self/mounts") -> str:
    """The type of the file system holding path (its longest mount point in mounts), or ""
    where that cannot be read."""
    path = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open(mounts) as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        # Spaces and other odd bytes in a mount point are written as octal escapes (\040).
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def _write_all(f: Any, data: memoryview) -> None:
    while data:
        data = data[f.write(data):]


def _read_raw(marker: dict, folder: str) -> torch.Tensor:
    """The tensor a Spill marker stands for, mapped (copy on write) from its file; ValueError
    where the marker or the file is not one Spill could have written."""
    name, shape, dtype = marker.get(RAW_KEY), marker.get("shape"), marker.get("dtype")
    if not (set(marker) == {RAW_KEY, "shape", "dtype"} and isinstance(name, str)
            and _RAW_NAME.fullmatch(name) and isinstance(shape, list)
            and all(type(d) is int and d >= 0 for d in shape) and dtype in RAW_DTYPES):
        raise ValueError(f"a malformed raw tensor marker: {str(marker)[:200]}")
    if os.path.islink(folder):
        raise ValueError(f"{folder} is a symbolic link")
    path = os.path.join(folder, name)
    info = os.lstat(path)
    numel = math.prod(shape)
    size = numel * torch.empty((), dtype=RAW_DTYPES[dtype]).element_size()
    if not stat.S_ISREG(info.st_mode) or info.st_size != size or size == 0:
        raise ValueError(f"{path} is not a regular file of {size} bytes ({dtype} {shape})")
    return torch.from_file(path, shared=False, size=numel, dtype=RAW_DTYPES[dtype]).view(shape)


def _resolve_raw(value: Any, folder: str) -> Any:
    if isinstance(value, dict):
        if RAW_KEY in value:
            return _read_raw(value, folder)
        return {k: _resolve_raw(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_raw(v, folder) for v in value]
    if isinstance(value, tuple):
        return tuple(_resolve_raw(v, folder) for v in value)
    return value


def to_cpu(values: list) -> list:
    """A detached CPU copy of each tensor, owned by the caller; other values as they are."""
    return [host_copy(v) if isinstance(v, torch.Tensor) else v for v in values]


def output_list(output: Any) -> list:
    """forward's result as a list: a tuple or list as its items, anything else as one item."""
    return list(output) if isinstance(output, (tuple, list)) else [output]


def type_name(value: Any) -> str:
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def describe(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    return {"value": value}


# --- devices -----------------------------------------------------------------------------------


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


POISON_SMALL_BLOCKS = 64  # 1 MiB each: the caching allocator's small-block pool
POISON_LARGE_MAX_BYTES = 16 << 30


def poison_cuda_allocator(byte: int = 0xFF) -> None:
    """Leaves the caching allocator's free memory filled with `byte` (0xFF: NaN in every
    floating dtype), so memory a candidate allocates and never writes reads as poison, not
    stale values."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    large = min(free // 2, POISON_LARGE_MAX_BYTES)
    blocks = [torch.empty(large, dtype=torch.uint8, device="cuda")]
    blocks += [torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
               for _ in range(POISON_SMALL_BLOCKS)]
    for block in blocks:
        block.fill_(byte)
    torch.cuda.synchronize()
    del blocks


# --- timed calls -------------------------------------------------------------------------------


FINGERPRINT_SAMPLES = 256  # elements of each timed call's output compared one by one


class TimedPlan:
    """What the timed calls of timing.py run on and keep, derived from a secret the evaluator
    reveals only once warm-up is over (T7, T8, T11, S8): call i runs on a fresh copy of profile
    set i mod P whose floating inputs are scaled by a factor s_i in [0.5, 1), each element's by
    s_i times its own factor in (1 - 2 JITTER, 1] (no value grows: an input meant to stay in
    [0, 1] stays there), so no two calls see the same values and no output can be computed
    before the call, not even by rescaling an output recorded during warm-up (which one factor
    per call allows for a task that is homogeneous: relu, a product without bias); a fingerprint
    of every call's outputs is kept, and the outputs of `saved` calls in full. check.py --timed
    derives the same plan from the same secret and recomputes all of it with the reference."""

    JITTER = 1 / 16

    def __init__(self, secret: int, iters: int, sets: int, save_calls: int) -> None:
        rng = random.Random(secret)
        self.iters, self.sets = iters, sets
        self.scales = [0.5 + 0.5 * rng.random() for _ in range(iters)]
        self.saved = sorted(rng.sample(range(iters), max(0, min(save_calls, iters))))
        self._weight_seed = rng.getrandbits(62)
        self._weights: dict[tuple, Any] = {}
        self._sample_seed = rng.getrandbits(62)
        self._jitter_seed = rng.getrandbits(62)

    @staticmethod
    def copy(values: list) -> list:
        """New tensors with the same values (warm-up calls never reuse an allocation either)."""
        return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]

    def inputs(self, base_sets: list[list], i: int) -> list:
        """Call i's inputs: new tensors on the base set's device, floating ones scaled element by
        element (the factors drawn on that device from the secret, the same in every process).
        Two passes over memory: the factors drawn straight into [s_i (1 - 2 JITTER), s_i), then
        one product into a new tensor; a clone first and the factors shaped in place took six."""
        scale = self.scales[i]
        low, high = scale * (1 - 2 * self.JITTER), scale
        inputs = []
        for k, value in enumerate(base_sets[i % self.sets]):
            if isinstance(value, torch.Tensor):
                if value.is_floating_point() or value.is_complex():
                    generator = torch.Generator(device=value.device)
                    generator.manual_seed(self._jitter_seed + i * 1009 + k)
                    real = value.real.dtype if value.is_complex() else value.dtype
                    factors = torch.empty(value.shape, dtype=real, device=value.device)
                    value = value * factors.uniform_(low, high, generator=generator)
                else:
                    value = value.clone()
            inputs.append(value)
        return inputs

    def weights(self, output: int, tensor: torch.Tensor) -> torch.Tensor:
        """Output j's weights in [-1, 1), one per element of fingerprint_view(tensor), in its
        dtype, from the secret."""
        key = self._weight_key(output, tensor)
        if key not in self._weights:
            numel = tensor.numel() * (2 if tensor.is_complex() else 1)
            generator = torch.Generator(device=tensor.device)
            generator.manual_seed(self._weight_seed + output)
            uniform = torch.empty(numel, dtype=fingerprint_dtype(tensor), device=tensor.device)
            self._weights[key] = uniform.uniform_(-1, 1, generator=generator)
        return self._weights[key]

    def weight_magnitudes(self, output: int, tensor: torch.Tensor) -> tuple[torch.Tensor, float]:
        """|weights| of output j and their sum, for check.py's limits (kept like the weights)."""
        key = ("magnitudes", *self._weight_key(output, tensor))
        if key not in self._weights:
            magnitudes = self.weights(output, tensor).abs()
            self._weights[key] = (magnitudes, float(magnitudes.sum()))
        return self._weights[key]

    @staticmethod
    def _weight_key(output: int, tensor: torch.Tensor) -> tuple:
        return (output, tuple(tensor.shape), tensor.is_complex(), fingerprint_dtype(tensor),
                str(tensor.device))

    def positions(self, output: int, numel: int) -> torch.Tensor:
        """FINGERPRINT_SAMPLES element positions of an output, from the secret (on the CPU)."""
        generator = torch.Generator()
        generator.manual_seed(self._sample_seed + output)
        return torch.randint(0, max(numel, 1), (min(FINGERPRINT_SAMPLES, numel),),
                             generator=generator)

    def fingerprint(self, outputs: list) -> list[list]:
        """[sum, weighted sum, sampled elements] of each output (weights in [-1, 1) and the
        sampled positions from the secret), accumulated in float32 (float64 for a 64-bit output:
        fingerprint_dtype): one read of the output for the sum and one beside the weights for the
        weighted sum, where widening the output to float64 first took five passes over twice its
        size. The sums hold the whole output to the tolerances in aggregate, which another call's
        output of the same statistics can meet; the samples hold a few elements to them one by
        one, which it cannot."""
        result = []
        for j, output in enumerate(outputs):
            flat = fingerprint_view(output)
            pair = torch.stack([flat.sum(), torch.dot(flat, self.weights(j, output))])
            samples = flat[self.positions(j, flat.numel()).to(flat.device)]
            result.append([float(v) for v in pair.cpu()] + [[float(v) for v in samples.cpu()]])
        return result


def fingerprint_dtype(tensor: torch.Tensor) -> torch.dtype:
    """What a timed call's output is summed in: float64 for 64-bit floats (and complex128),
    float32 for every other dtype."""
    wide = tensor.real.dtype if tensor.is_complex() else tensor.dtype
    return torch.float64 if wide == torch.float64 else torch.float32


def fingerprint_view(tensor: torch.Tensor) -> torch.Tensor:
    """tensor's elements (a complex one's real and imaginary parts) as one flat tensor of
    fingerprint_dtype: the tensor itself where it already is one, contiguous and real."""
    tensor = tensor.detach()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.reshape(-1).to(fingerprint_dtype(tensor))

