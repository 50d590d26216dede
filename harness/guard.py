"""The dispatch guard: during ModelNew.forward no torch compute may run.

A TorchDispatchMode sees every aten op that reaches the dispatcher, from Python or from C++.
Allocation and views pass; library GEMM and convolution pass and are recorded; anything else is
recorded as a violation and raises, so a try/except fallback to torch fails as well. Used by
run_candidate.py and timing.py around each candidate call:

    guard = DispatchGuard()
    with guard:
        out = model(*inputs)
    guard.violations, guard.library_ops

Each op through the mode costs several microseconds of Python (5.4 on the CI machine, about 24
on a loaded GPU machine), host time that eager's and torch.compile's timed calls do not pay and
that a candidate of many small kernels pays in full. So timing.py's timed calls run under a
TimedGuard instead: the profiler's record functions (C++; 1.6 us an op on the CI machine, the
views' inner ops recorded too: bench/wrapper_overhead.py) list the ops each timed call ran, and
every one must have run, at the same place in the call tree, in a warm-up call that the
dispatch guard passed. A timed call can do nothing a guarded call did not.
"""

import functools
import secrets
from typing import Any

import torch
import torch._C._autograd as _autograd
from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
    _pop_mode,
)

from watch import add_violation, pinned_precision, precision_pinned

# Op overload packet names ("aten::empty" covers aten::empty.memory_format and its overloads).
ALLOCATION_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::empty_permuted",
    "aten::new_empty", "aten::new_empty_strided",
    "aten::zeros", "aten::zeros_like", "aten::new_zeros",
    "aten::zero_", "aten::fill_",
})

VIEW_OPS = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::_reshape_alias", "aten::view_as",
    "aten::as_strided", "aten::alias", "aten::detach",
    "aten::permute", "aten::transpose", "aten::t", "aten::expand", "aten::expand_as",
    "aten::squeeze", "aten::unsqueeze", "aten::select", "aten::slice", "aten::narrow",
    "aten::split", "aten::split_with_sizes", "aten::unbind", "aten::chunk",
    "aten::diagonal", "aten::unfold", "aten::view_as_real", "aten::view_as_complex",
})

LIBRARY_OPS = frozenset({
    "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm",
    "aten::convolution", "aten::_convolution", "aten::convolution_overrideable",
    "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::mkldnn_convolution", "aten::miopen_convolution",
})


class GuardViolation(RuntimeError):
    """Raised inside forward when a forbidden op is called."""


def classify_packet(packet: str) -> str:
    """"allowed", "library" or "compute", for an op packet name like "aten::empty"."""
    if packet in ALLOCATION_OPS or packet in VIEW_OPS:
        return "allowed"
    if packet in LIBRARY_OPS:
        return "library"
    return "compute"


@functools.cache
def _classify(func: torch._ops.OpOverload) -> tuple[str, str]:
    """(kind, packet name) of an op: kind is "allowed", "library" or "compute"."""
    packet = func.name().split(".", 1)[0]
    return classify_packet(packet), packet


class DispatchGuard(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in dynamo.disable, whose first call imports
        # torch._dynamo: seconds per process. Nothing is ever compiled inside the guard.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[dict[str, str]] = []
        self.library_ops: list[str] = []

    def _violate(self, rule: str, detail: str) -> None:
        add_violation(self.violations, rule, detail)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        kind, packet = _classify(func)
        if kind == "compute":
            self._violate("torch_compute_op", f"{func.name()} called during ModelNew.forward")
            raise GuardViolation(
                f"{func.name()} is torch compute, forbidden during ModelNew.forward: only "
                "allocation, views and library GEMM/convolution may run; write a kernel for it")
        if kind == "library":
            if packet not in self.library_ops:
                self.library_ops.append(packet)
            if not precision_pinned():  # S11: TF32 switched on just for this call
                self._violate("precision_changed", f"{func.name()} ran with precision flags "
                              "other than the evaluator's: it pins " + pinned_precision())
        return func(*args, **(kwargs or {}))

    def __exit__(self, exc_type, exc_value, exc_tb) -> None:
        if _get_current_dispatch_mode() is self:
            super().__exit__(exc_type, exc_value, exc_tb)
            return
        self._violate("guard_tampered",
                      "the dispatch guard was no longer the active mode when ModelNew.forward "
                      "returned")
        stack = _get_current_dispatch_mode_stack()
        if self in stack:  # covered by modes the candidate pushed: drop them, then this one
            for _ in range(len(stack) - 1 - stack.index(self)):
                _pop_mode()
            super().__exit__(exc_type, exc_value, exc_tb)


# --- timed calls -------------------------------------------------------------------------------

# The record that opens each recording, a fresh name each time: a call whose record lacks it was
# recorded by a profiler session other than the guard's (the candidate ended the guard's and
# began its own).
_OPENING = "cuda-agent timed call"


_CANONICAL = {**{op: "(a view)" for op in VIEW_OPS},
              **{op: "(an allocation)" for op in ALLOCATION_OPS}}


def call_paths(threads: list) -> set[tuple[str, ...]]:
    """The ops of a recording (the legacy profiler's events, a list a thread, each event a push,
    pop or mark) as their call paths: the names from the outermost op down to each op, an op
    that runs itself again directly (as the dispatch guard's mode does with each op it passes)
    named once, and nothing below an allocation, a view or a library op (their insides are
    torch's and the library's, not the candidate's, and may differ from call to call). Views
    and allocations are named by their kind alone: which of them a composite op picks can
    depend on the dispatch guard itself (reshape makes a view with `view` under a dispatch mode
    and with `_reshape_alias` without one), and none of them computes."""
    paths = set()
    for events in threads:
        stack: list[tuple[tuple[str, ...], bool]] = []  # (path, whether ops below it count)
        for event in events:
            kind = event.kind()
            if kind == "push":
                path, open_below = stack[-1] if stack else ((), True)
                op = event.name()
                name = _CANONICAL.get(op, op)
                if open_below and (not path or path[-1] != name):
                    path = path + (name,)
                    paths.add(path)
                    open_below = classify_packet(op) == "compute"
                stack.append((path, open_below))
            elif kind == "pop" and stack:
                stack.pop()
    return paths


class CallRecord:
    """Records the ops run inside it with the profiler (CPU record functions only, no devices'
    activity, no shapes): paths holds their call_paths after the exit, tampered what went wrong
    where the recording was ended or replaced from inside ("" where nothing did)."""

    _CONFIG = ProfilerConfig(ProfilerState.CPU, False, False, False, False, False,
                             _ExperimentalConfig())

    def __init__(self) -> None:
        self.paths: set[tuple[str, ...]] = set()
        self.tampered = ""
        self._opening = f"{_OPENING} {secrets.token_hex(8)}"

    def __enter__(self) -> "CallRecord":
        _autograd._enable_profiler_legacy(self._CONFIG)
        with torch.autograd.profiler.record_function(self._opening):
            pass
        return self

    def __exit__(self, exc_type, exc_value, exc_tb) -> None:
        try:
            threads = _autograd._disable_profiler_legacy()
        except RuntimeError as error:
            self.tampered = f"the recording of the call's ops was ended inside it ({error})"
            return
        if not any(event.name() == self._opening for events in threads for event in events):
            self.tampered = "the recording of the call's ops was replaced inside it"
            return
        self.paths = call_paths(threads)
        self.paths.discard((self._opening,))


class TimedGuard:
    """The guard of timed calls, at the cost of a profiler's record per op rather than the
    dispatch guard's Python. learning() is the dispatch guard with a CallRecord: what a call it
    passes ran is allowed from then on. Entered itself, it records the call, and an op at a call
    path no passed call had is a torch_compute_op violation (in the dispatch guard's
    violations), a recording ended or replaced from inside a guard_tampered one; until a call
    has passed the dispatch guard, entering it is learning()."""

    def __init__(self, guard: DispatchGuard) -> None:
        self.guard = guard
        self.allowed: set[tuple[str, ...]] = set()
        self.taught = False
        self._inside: Any = None

    def learning(self) -> "_Learning":
        return _Learning(self)

    def __enter__(self) -> "TimedGuard":
        self._inside = (CallRecord() if self.taught else self.learning()).__enter__()
        return self

    def __exit__(self, exc_type, exc_value, exc_tb) -> None:
        inside, self._inside = self._inside, None
        inside.__exit__(exc_type, exc_value, exc_tb)
        if not isinstance(inside, CallRecord):
            return
        if inside.tampered:
            self.guard._violate("guard_tampered", inside.tampered)
            return
        unseen = inside.paths - self.allowed
        for path in sorted(p for p in unseen if not any(p[:k] in unseen for k in range(1, len(p)))):
            self.guard._violate("torch_compute_op",
                                f"{' > '.join(path)} ran in a timed call of ModelNew.forward "
                                "and in no call the dispatch guard passed")


class _Learning:
    """TimedGuard.learning(): the dispatch guard, and a record of the call's ops that its
    TimedGuard allows from then on where the guard found nothing."""

    def __init__(self, timed: TimedGuard) -> None:
        self.timed = timed
        self.record = CallRecord()

    def __enter__(self) -> "_Learning":
        self.record.__enter__()
        self.timed.guard.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, exc_tb) -> None:
        try:
            self.timed.guard.__exit__(exc_type, exc_value, exc_tb)
        finally:
            self.record.__exit__(exc_type, exc_value, exc_tb)
        if self.record.tampered:
            self.timed.guard._violate("guard_tampered", self.record.tampered)
        elif exc_type is None and not self.timed.guard.violations:
            self.timed.allowed |= self.record.paths
            self.timed.taught = True
