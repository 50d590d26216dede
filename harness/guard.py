"""The dispatch guard: during ModelNew.forward no torch compute may run.

A TorchDispatchMode sees every aten op that reaches the dispatcher, from Python or from C++.
Allocation and views pass; library GEMM and convolution pass and are recorded; anything else is
recorded as a violation and raises, so a try/except fallback to torch fails as well. Used by
run_candidate.py and timing.py around each candidate call:

    guard = DispatchGuard()
    with guard:
        out = model(*inputs)
    guard.violations, guard.library_ops
"""

import functools
from typing import Any

import torch
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
