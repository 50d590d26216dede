"""In-process checks around a candidate's calls (the candidate's process is not trusted, so these
are tripwires, not proofs: what must hold by construction is checked by trusted processes).

A Watch is made before model_new.py is imported, so it records the process as the harness left
it: the attributes of the modules and classes the harness relies on, the precision flags, the
threads. After each call `check()` says what the candidate changed:

- harness_tampered (T3, T4, S10): an attribute of torch, torch.Tensor, time, the harness modules,
  ... no longer holds the object it held (a monkey-patched timer, checker or tensor method);
- precision_changed (S11): TF32 or reduced-precision flags were turned on;
- background_thread (T2): a Python thread the candidate started is still alive after forward
  returned, or a native thread it started keeps using the CPU once forward has returned;
- l2_persistence (T10, cuda): the persisting-L2 limit was raised.
"""

import os
import sys
import threading
import time
import types
from collections import Counter
from typing import Any

import torch

# What the harness itself calls, by module or class: a candidate that replaces any attribute of
# these changes what the harness measures or reads.
WATCHED = (
    "torch", "torch.Tensor", "torch._C.TensorBase", "torch.nn.Module", "torch.nn.functional",
    "torch.cuda", "torch.cuda.Event", "torch.cuda.Stream", "torch.testing", "torch.serialization",
    "torch.backends.cuda", "torch.backends.cudnn", "time", "threading", "os", "json", "builtins",
    "common", "guard", "watch", "__main__",
)

# The clock id of a thread's CPU time (Linux's MAKE_THREAD_CPUCLOCK): ~tid << 3, with these bits.
_THREAD_SCHED_CLOCK = 0b110  # CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED
_PF_EXITING = 0x4  # a task flag in field 9 of /proc/.../stat: the thread is in do_exit

SETTLE_S = 0.002            # how long threads are watched after a call returns
BUSY_NS = 200_000           # CPU time after the return that makes a thread a working one
LOADED_S = 0.05             # how long a thread runnable throughout SETTLE_S is watched further
# Threads of the CUDA driver itself, which wake now and then on its own business (a bench saw its
# event handler spend 0.26 ms on a CPU just after a correct candidate's call returned): not the
# candidate's work when they existed, under that name, before any candidate code ran.
DRIVER_THREADS = ("cuda-EvtHandlr",)


def _resolve(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    module, _, attribute = name.rpartition(".")
    owner = _resolve(module) if module else None
    return getattr(owner, attribute, None)


def precision_flags() -> dict[str, Any]:
    """The numeric-precision settings the harness pins (common.pin_precision)."""
    flags = {
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
    }
    if torch.cuda.is_available():
        flags["autocast_cuda"] = torch.is_autocast_enabled("cuda")
    return flags


def add_violation(violations: list[dict[str, str]], rule: str, detail: str) -> None:
    """Records a violation once (a rule broken on every call is one finding)."""
    violation = {"rule": rule, "detail": detail}
    if violation not in violations:
        violations.append(violation)


def _tids() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _cpu_ns(tid: int) -> int:
    """Nanoseconds thread tid has spent on a CPU (0 once it is gone), from its CPU-time clock.
    /proc/self/task/TID/schedstat is not enough: a thread's total there is brought up to date
    only when it leaves a CPU, so an OpenMP worker that ran its share of the call just before
    the return could show that share as spent after it."""
    try:
        return time.clock_gettime_ns((~tid << 3) | _THREAD_SCHED_CLOCK)
    except OSError:
        return 0


def _state(tid: int) -> tuple[bool, bool]:
    """Whether thread tid is on a CPU or waiting for one (state R), and whether it is exiting
    (PF_EXITING: a thread already joined can still be listed while the kernel tears it down)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0] == "R", bool(int(fields[6]) & _PF_EXITING)
    except (OSError, IndexError, ValueError):
        return False, False


def _thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "gone"


def _threads_now(me: int) -> dict[int, tuple[int, bool, bool]]:
    """Every thread but me: its CPU time, whether it is running and whether it is exiting."""
    return {tid: (_cpu_ns(tid), *_state(tid)) for tid in _tids() if tid != me}


class L2Control:
    """The CUDA runtime's persisting-L2 controls, through the libcudart torch has loaded."""

    LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize

    def __init__(self) -> None:
        import ctypes  # only the harness uses ctypes here; the candidate may not

        self._ctypes = ctypes
        self._lib = None
        for name in self._candidates():
            try:
                self._lib = ctypes.CDLL(name)
                break
            except OSError:
                continue

    @staticmethod
    def _candidates() -> list[str]:
        names = []
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    path = line.split()[-1]
                    if "libcudart.so" in path and path not in names:
                        names.append(path)
        except OSError:
            pass
        return names + ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]

    @property
    def available(self) -> bool:
        return self._lib is not None

    def reset(self) -> None:
        """Demotes every persisting L2 line to normal, so the flush evicts it (T10)."""
        if self._lib is not None:
            self._lib.cudaCtxResetPersistingL2Cache()

    def persisting_limit(self) -> int:
        if self._lib is None:
            return 0
        value = self._ctypes.c_size_t(0)
        self._lib.cudaDeviceGetLimit(self._ctypes.byref(value), self.LIMIT_PERSISTING_L2)
        return int(value.value)


class Watch:
    def __init__(self, device: str, violations: list[dict[str, str]]) -> None:
        self.device = device
        self.violations = violations  # shared with the guard: one list in the report
        self._snapshot: list[tuple[str, Any, dict[str, Any]]] = []
        for name in WATCHED:
            owner = _resolve(name)
            if owner is not None:
                self._snapshot.append((name, owner, {
                    key: value for key, value in vars(owner).items() if _patchable(value)}))
        self._flags = precision_flags()
        self._python_threads = {t.ident for t in threading.enumerate()}
        self._native_threads = _tids()
        self._driver_threads = {tid for tid in self._native_threads
                                if _thread_name(tid) in DRIVER_THREADS}
        self.l2 = L2Control() if device == "cuda" else None
        # Snapshots taken by returned() for the next check_threads_idle().
        self._at_return: dict[int, tuple[int, bool, bool]] | None = None
        self._python_at_return: list[threading.Thread] = []
        # What the first call after which a thread was on a CPU too long saw (None: no call yet).
        self._working_once: str | None = None
        self._l2_limit = self.l2.persisting_limit() if self.l2 is not None else 0

    def _violate(self, rule: str, detail: str) -> None:
        add_violation(self.violations, rule, detail)

    def settled(self) -> None:
        """Native threads alive now (the candidate's loader and warm-up may start thread pools,
        OpenMP's among them) are not new; they must still be idle after each call."""
        self._native_threads = _tids()

    def check(self, after: str) -> list[dict[str, str]]:
        """Everything the candidate changed so far; `after` names the moment for the details."""
        self._check_attributes(after)
        self._check_precision(after)
        self._check_python_threads(after)
        if self.l2 is not None and self.l2.persisting_limit() > self._l2_limit:
            self._violate("l2_persistence", f"the persisting L2 cache limit was raised {after}; "
                          "data pinned in L2 would survive the flush between timed calls")
        return self.violations

    def returned(self) -> None:
        """Call as soon as the candidate's call has returned (and any timer has stopped): every
        other thread's CPU time and state at that moment, for check_threads_idle()."""
        self._at_return = _threads_now(threading.get_native_id())
        self._python_at_return = [t for t in threading.enumerate()
                                  if t.ident not in self._python_threads and t.is_alive()]

    def check_threads_idle(self, after: str) -> None:
        """A thread that keeps working once forward has returned is doing the call's work
        outside the timed region (T2). Over the SETTLE_S after the return, a thread is working
        when it spends BUSY_NS on a CPU, or runs at both ends of the window and on a CPU in
        between; and a thread that did not exist before the call, was alive at its return
        without exiting and is gone by the end of the window did its work after the return (a
        joined thread may still be listed at the return, but already exiting). A thread working
        after one call is a violation once a thread works after a second one. Threads that
        outlive the window idle (a kernel's OpenMP pool) become part of the process as it is."""
        me = threading.get_native_id()
        before = self._at_return if self._at_return is not None else _threads_now(me)
        python_late = self._python_at_return
        self._at_return, self._python_at_return = None, []
        time.sleep(SETTLE_S)
        now = _threads_now(me)
        if python_late:
            self._violate("background_thread",
                          f"Python thread {python_late[0].name!r} started by the candidate was "
                          f"still running {after}: the call's work must be done when it returns")
            return
        for tid, (cpu_before, running_before, exiting) in before.items():
            if tid in self._driver_threads:
                continue
            if tid not in now:
                if tid not in self._native_threads and not exiting:
                    self._violate("background_thread",
                                  f"thread {tid}, started during the call, was still alive "
                                  f"{after} and ended within {SETTLE_S * 1e3:.0f} ms: work must "
                                  "be finished when ModelNew.forward returns")
                    return
                continue
            cpu_ns, running, _ = now[tid]
            busy = cpu_ns - cpu_before
            # Runnable at both ends but never on a CPU in between is waiting for one (a loaded
            # machine), not working. Runnable at both ends with a little time on a CPU may be
            # a worker that got a CPU late and is still on its way back to sleep: it is watched
            # until it sleeps.
            working, watched_s = busy > BUSY_NS, SETTLE_S
            if not working and running and running_before and busy > 0:
                working, busy, watched_s = self._works_on(tid, cpu_before, busy)
            if working:
                seen = (f"thread {tid} ({_thread_name(tid)}) kept running {after} "
                        f"({busy / 1e6:.2f} ms on a CPU in the {watched_s * 1e3:.0f} ms after "
                        "the return)")
                # Once can be a busy machine: a virtual CPU taken from a worker on its way back
                # to sleep is counted as that worker's time. Work moved out of the timed region
                # is moved on every call, so a second call decides.
                if self._working_once is None:
                    self._working_once = seen
                    break
                self._violate("background_thread",
                              f"{seen}, as {self._working_once}: work must be finished when "
                              "ModelNew.forward returns")
                return
        self._native_threads = set(now) | {me}

    def _works_on(self, tid: int, cpu_before: int, busy: int) -> tuple[bool, int, float]:
        """Whether thread tid, runnable at both ends of the window with a little time on a CPU
        in it, is working: it spends more than BUSY_NS since the return, stays runnable for
        LOADED_S more, or ends having been started by the call. A worker that got a CPU late
        and goes back to sleep is not. Also its CPU time since the return, and the seconds
        watched."""
        began = time.monotonic() - SETTLE_S
        while time.monotonic() - began < SETTLE_S + LOADED_S:
            time.sleep(SETTLE_S)
            if tid not in _tids():
                return tid not in self._native_threads, busy, time.monotonic() - began
            busy = _cpu_ns(tid) - cpu_before
            if busy > BUSY_NS or not _state(tid)[0]:
                return busy > BUSY_NS, busy, time.monotonic() - began
        return True, busy, time.monotonic() - began

    def _check_attributes(self, after: str) -> None:
        for name, owner, saved in self._snapshot:
            now = vars(owner)
            changed = next((key for key, value in saved.items()
                            if now.get(key, _MISSING) is not value), None)
            if changed is None and isinstance(owner, type) and len(now) != len(saved):
                # A class method can also be shadowed by a new attribute (torch.Tensor.cpu is
                # inherited from TensorBase until something sets it on torch.Tensor).
                changed = next((key for key, value in now.items()
                                if key not in saved and _patchable(value)), None)
            if changed is not None:
                self._violate("harness_tampered",
                              f"{name}.{changed} was replaced {after}: the harness's modules, "
                              "torch and its timers may not be patched")
                return

    def _check_precision(self, after: str) -> None:
        now = precision_flags()
        for key, value in self._flags.items():
            if now.get(key) != value:
                self._violate("precision_changed",
                              f"{key} was changed from {value!r} to {now.get(key)!r} {after}: "
                              f"the evaluator pins {_pinned} precision")
                pin_precision()  # one finding must not also turn into a wrong measurement
                return

    def _check_python_threads(self, after: str) -> None:
        extra = [t for t in threading.enumerate()
                 if t.ident not in self._python_threads and t.is_alive()]
        if extra:
            self._violate("background_thread",
                          f"Python thread {extra[0].name!r} started by the candidate is still "
                          f"running {after}: the call's work must be done when it returns")


_MISSING = object()


def _patchable(value: Any) -> bool:
    """Code a patch would replace: functions, methods, classes, descriptors, modules. Plain data
    (flags, counters, caches) changes legitimately and is not watched."""
    return callable(value) or isinstance(value, (staticmethod, classmethod, property,
                                                 types.ModuleType))


# The precisions the evaluator pins: full fp32 by default; "tf32" (`--tf32`, candidate processes
# alone) lets cuBLAS and cuDNN take fp32 GEMMs and convolutions in TF32.
PRECISIONS = ("fp32", "tf32")
_pinned = "fp32"


def pin_precision(precision: str | None = None) -> None:
    """Sets the precision flags to the pinned precision, first pinning `precision` where given:
    full fp32 (no TF32 in cuBLAS or cuDNN) unless the evaluator asked for TF32."""
    global _pinned
    if precision is not None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is none of {', '.join(PRECISIONS)}")
        _pinned = precision
    tf32 = _pinned == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def pinned_precision() -> str:
    return _pinned


def precision_pinned() -> bool:
    """Whether the flags are as pin_precision set them."""
    tf32 = _pinned == "tf32"
    return (torch.backends.cuda.matmul.allow_tf32 == tf32
            and torch.backends.cudnn.allow_tf32 == tf32
            and torch.get_float32_matmul_precision() == ("high" if tf32 else "highest"))


# --- what one call really ran (B1, B2) ---------------------------------------------------------

# Kernels of the libraries a candidate may call (cuBLAS, cuBLASLt, CUTLASS, cuDNN) and of the
# allocation ops it may use (torch's fill kernels behind zeros and fill_), by name fragment.
LIBRARY_KERNELS = ("gemm", "gemv", "cutlass", "cublas", "nvjet", "xmma", "cudnn", "conv",
                   "winograd", "implicit", "fft", "splitk", "sm90_", "sm80_", "ampere", "hopper",
                   "dot_kernel", "scal_kernel", "axpy")
ALLOCATION_KERNELS = ("fillfunctor", "fill_kernel", "memset")


def kernel_identifier(name: str) -> str:
    """"void ns::scale_relu<4>(float const*, ...)" -> "scale_relu": what a mangled symbol of the
    kernel contains literally."""
    head = name.split("(", 1)[0].split("<", 1)[0].strip()
    return head.rsplit(" ", 1)[-1].rsplit("::", 1)[-1]


def library_launched(events: list) -> Counter[str]:
    """The device kernels launched inside a library op (aten::cudnn_convolution, aten::mm, ...)
    among events and below, by name and count: the library's own, whatever they are called (cuDNN
    runs helpers such as flip_filter before a convolution), and those of the ops it calls (the
    bias add of aten::_convolution). The profiler files a kernel under the innermost op running
    at its launch."""
    from guard import classify_packet  # guard imports this module
    launched: Counter[str] = Counter()

    def walk(event: Any, inside: bool) -> None:
        inside = inside or (event.name.startswith("aten::")
                            and classify_packet(event.name) == "library")
        if inside:
            launched.update(kernel.name for kernel in getattr(event, "kernels", []) or [])
        for child in getattr(event, "cpu_children", []) or []:
            walk(child, inside)

    for event in events:
        walk(event, False)
    return launched


def first_foreign_kernel(kernels: list[str], by_library: Counter[str],
                         library_bytes: bytes) -> str | None:
    """The first kernel that is neither a copy or fill, nor one of the launches of a library op
    (by_library: each counts once), nor named like a cuBLAS/cuDNN/CUTLASS kernel, nor in the
    candidate's library (library_bytes)."""
    unclaimed = Counter(by_library)
    for name in kernels:
        lowered = name.lower()
        if lowered.startswith(("memcpy", "memset")):
            continue
        if unclaimed[name] > 0:
            unclaimed[name] -= 1
            continue
        if any(f in lowered for f in LIBRARY_KERNELS + ALLOCATION_KERNELS):
            continue
        identifier = kernel_identifier(name)
        if identifier and identifier.encode() in library_bytes:
            continue
        return name
    return None


class CallObserver:
    """Runs one call under torch's profiler and reports what the dispatch guard cannot see: aten
    compute that ran although the guard was switched off (torch_compute_op), and, on cuda, kernels
    that are neither the candidate's own (their names are in its library) nor a library's GEMM or
    convolution nor an allocation's fill (foreign_kernel: torch, Triton, anything else)."""

    def __init__(self, device: str, kernel_lib: str, violations: list[dict[str, str]]) -> None:
        self.device, self.violations = device, violations
        self._library_bytes = b""
        try:
            with open(kernel_lib, "rb") as f:
                self._library_bytes = f.read()
        except OSError:
            pass
        self._profiler: Any = None

    @staticmethod
    def _profile(device: str) -> Any:
        # torch.autograd's profiler, not torch.profiler's wrapper: that one imports
        # torch._inductor (seconds, and it patches torch.manual_seed on the way).
        if device == "cuda":
            return torch.autograd.profiler.profile(use_device="cuda", use_kineto=True)
        return torch.autograd.profiler.profile(use_kineto=False)

    @staticmethod
    def start_profiler(device: str) -> None:
        """Runs the profiler once, before the Watch is made: the thread torch's profiler starts
        on first use is then part of the process as the harness left it, not a new thread found
        starting up after the observed call returns (background_thread)."""
        with CallObserver._profile(device):
            torch.ones(1, device=device).add_(1)

    def __enter__(self) -> "CallObserver":
        self._profiler = self._profile(self.device)
        self._profiler.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._profiler.__exit__(*exc)
        if exc[0] is not None:
            return
        events = self._profiler.function_events
        top = [e for e in events if e.cpu_parent is None]
        self._check_ops(top)
        if self.device == "cuda":
            self._check_kernels(library_launched(top))

    def _violate(self, rule: str, detail: str) -> None:
        add_violation(self.violations, rule, detail)

    def _check_ops(self, events: list) -> bool:
        """True once a leaf compute op was found (and reported) among events and below."""
        from guard import classify_packet  # guard imports this module
        for event in events:
            name = event.name
            kind = classify_packet(name) if name.startswith("aten::") else None
            if kind in ("allowed", "library"):
                continue  # what runs inside an allowed op is the op's own business
            children = list(getattr(event, "cpu_children", []) or [])
            # Below an op there are runtime calls (cudaLaunchKernel) as well as aten ops: an op
            # with no aten op below it did the computing itself.
            if kind == "compute" and not any(c.name.startswith("aten::") for c in children):
                self._violate("torch_compute_op", f"{name} ran during ModelNew.forward with "
                              "the dispatch guard switched off (seen by the profiler)")
                return True
            if self._check_ops(children):
                return True
        return False

    def kernel_names(self) -> list[str]:
        """The device kernels that ran, by their own names, from kineto's raw results (the
        profiler's function events name a kernel after the op that launched it)."""
        results = getattr(self._profiler, "kineto_results", None)
        if results is None:
            return []
        cuda = torch.autograd.DeviceType.CUDA
        return [event.name() for event in results.events() if event.device_type() == cuda]

    def _check_kernels(self, by_library: Counter[str]) -> None:
        self.kernels = self.kernel_names()
        name = first_foreign_kernel(self.kernels, by_library, self._library_bytes)
        if name is not None:
            self._violate("foreign_kernel", f"kernel {name[:120]} ran during ModelNew.forward "
                          "but is not in the candidate's kernel library nor a cuBLAS or cuDNN "
                          "kernel: the work must be done by the candidate's own kernels")
