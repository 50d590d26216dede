"""The dispatch guard: what ModelNew.forward may and may not run."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode_stack,
    _pop_mode,
)

import torch._C._autograd as profiler_state

from guard import CallRecord, DispatchGuard, GuardViolation, TimedGuard
from watch import pin_precision


@pytest.fixture(autouse=True)
def pinned_precision():
    """Every harness process pins full fp32 precision before any candidate code runs."""
    pin_precision("fp32")
    yield
    pin_precision("fp32")

torch.manual_seed(0)
X = torch.randn(8, 16)
W = torch.randn(4, 16)
B = torch.randn(4)
IMAGE = torch.randn(1, 3, 8, 8)
FILTER = torch.randn(5, 3, 3, 3)

ALLOWED = {
    "empty_like": lambda: torch.empty_like(X),
    "empty on a device": lambda: torch.empty(3, 4, device=X.device, dtype=X.dtype),
    "zeros": lambda: torch.zeros(5),
    "fill_": lambda: torch.empty(5).fill_(1.5),
    "view": lambda: X.view(-1),
    "reshape of a contiguous tensor": lambda: X.reshape(2, 64),
    "contiguous of a contiguous tensor": lambda: X.contiguous(),
    "metadata": lambda: (X.size(), X.data_ptr(), X.numel(), X.stride(), X.is_contiguous()),
    "permute and transpose": lambda: X.unsqueeze(0).permute(2, 0, 1).transpose(0, 1),
    "indexing views": lambda: (X[0], X[:, 2:5], X[None], X.split(4), X.unbind(0)),
    "to the same device and dtype": lambda: X.to(X.device, X.dtype),
}

LIBRARY = {
    "torch.mm": (lambda: torch.mm(X, W.t()), "aten::mm"),
    "torch.matmul": (lambda: torch.matmul(X, W.t()), "aten::mm"),
    "F.linear": (lambda: F.linear(X, W, B), "aten::addmm"),
    "F.conv2d": (lambda: F.conv2d(IMAGE, FILTER), "aten::convolution"),
}

FORBIDDEN = {
    "x + 1": (lambda: X + 1, "aten::add.Tensor"),
    "torch.relu": (lambda: torch.relu(X), "aten::relu"),
    "F.softmax": (lambda: F.softmax(X, dim=-1), "aten::_softmax"),
    "x.sum()": (lambda: X.sum(), "aten::sum"),
    "x.clone()": (lambda: X.clone(), "aten::clone"),
    "x.to(float64)": (lambda: X.to(torch.float64), "aten::_to_copy"),
    "x.to(copy=True)": (lambda: X.to(X.device, copy=True), "aten::_to_copy"),
    "reshape of a transposed tensor": (lambda: X.t().reshape(-1), "aten::clone"),
}


@pytest.mark.parametrize("call", ALLOWED.values(), ids=ALLOWED.keys())
def test_allocation_views_and_metadata_pass(call) -> None:
    guard = DispatchGuard()
    with guard:
        call()
    assert guard.violations == []
    assert guard.library_ops == []
    assert _get_current_dispatch_mode_stack() == []


@pytest.mark.parametrize("call, op", LIBRARY.values(), ids=LIBRARY.keys())
def test_library_ops_pass_and_are_recorded(call, op: str) -> None:
    guard = DispatchGuard()
    with guard:
        call()
    assert guard.violations == []
    assert guard.library_ops == [op]


@pytest.mark.parametrize("call, op", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_compute_ops_raise_and_are_violations(call, op: str) -> None:
    guard = DispatchGuard()
    with pytest.raises(GuardViolation, match=op.replace(".", r"\.")):
        with guard:
            call()
    assert guard.violations == [
        {"rule": "torch_compute_op", "detail": f"{op} called during ModelNew.forward"}]
    assert _get_current_dispatch_mode_stack() == []


def test_a_caught_fallback_is_still_a_violation() -> None:
    def forward(x: torch.Tensor) -> torch.Tensor:
        try:
            return torch.relu(x)
        except Exception:
            return torch.empty_like(x)  # pretend a kernel ran

    guard = DispatchGuard()
    with guard:
        forward(X)
    assert [v["rule"] for v in guard.violations] == ["torch_compute_op"]
    assert "aten::relu" in guard.violations[0]["detail"]


def test_removing_the_guard_is_a_violation() -> None:
    guard = DispatchGuard()
    with guard:
        _pop_mode()
        X + 1  # no longer seen
    assert [v["rule"] for v in guard.violations] == ["guard_tampered"]
    assert _get_current_dispatch_mode_stack() == []


def test_covering_the_guard_with_another_mode_is_a_violation() -> None:
    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    guard = DispatchGuard()
    with guard:
        PassThrough().__enter__()
    assert [v["rule"] for v in guard.violations] == ["guard_tampered"]
    assert _get_current_dispatch_mode_stack() == []


def test_a_guard_can_be_entered_again_and_keeps_its_records() -> None:
    guard = DispatchGuard()
    for _ in range(2):
        with guard:
            torch.mm(X, W.t())
            with pytest.raises(GuardViolation):
                X * 2
    assert guard.library_ops == ["aten::mm"]
    assert [v["detail"] for v in guard.violations] == [
        "aten::mul.Tensor called during ModelNew.forward"]


def test_a_library_op_under_tf32_is_a_precision_violation() -> None:
    guard = DispatchGuard()
    torch.backends.cuda.matmul.allow_tf32 = True
    with guard:
        torch.mm(X, W.t())
    assert [v["rule"] for v in guard.violations] == ["precision_changed"]
    assert "aten::mm" in guard.violations[0]["detail"]


def test_under_a_tf32_pin_tf32_is_no_violation_and_full_fp32_is() -> None:
    pin_precision("tf32")  # what the evaluator asks of a candidate process under --tf32
    guard = DispatchGuard()
    with guard:
        torch.mm(X, W.t())
    assert guard.violations == []
    torch.backends.cuda.matmul.allow_tf32 = False
    with guard:
        torch.mm(X, W.t())
    assert [v["rule"] for v in guard.violations] == ["precision_changed"]
    assert "it pins tf32" in guard.violations[0]["detail"]


# --- the timed calls' guard ---------------------------------------------------------------------


def honest_forward(x: torch.Tensor) -> torch.Tensor:
    """A candidate's call as the synthesizer writes them: a library GEMM, views, an allocation."""
    y = F.linear(x, W).view(-1, 2)
    return torch.empty_like(y)


def taught_guard() -> TimedGuard:
    timed = TimedGuard(DispatchGuard())
    with timed.learning():
        honest_forward(X)
    assert timed.taught and timed.guard.violations == []
    return timed


def test_timed_calls_that_do_what_a_guarded_call_did_pass() -> None:
    timed = taught_guard()
    for x in torch.randn(3, 8, 16):
        with timed:
            honest_forward(x)
    assert timed.guard.violations == []
    assert profiler_state._profiler_enabled() is False


def test_a_fallback_in_timed_calls_only_is_a_violation() -> None:
    timed = taught_guard()
    with timed:
        torch.relu(honest_forward(X))  # not raised: found once the call has returned
    assert timed.guard.violations == [{
        "rule": "torch_compute_op",
        "detail": "aten::relu ran in a timed call of ModelNew.forward and in no call the "
                  "dispatch guard passed"}]


def test_an_op_the_guard_passed_elsewhere_is_a_violation_at_another_place() -> None:
    # The guard passed reshape as a view of a contiguous tensor; of a transposed one it copies.
    timed = TimedGuard(DispatchGuard())
    with timed.learning():
        X.reshape(-1)
    with timed:
        X.t().reshape(-1)
    details = [v["detail"] for v in timed.guard.violations]
    assert "aten::reshape > aten::clone ran in a timed call of ModelNew.forward and in no call " \
        "the dispatch guard passed" in details
    assert "aten::reshape ran in a timed call" not in " ".join(details)  # passed where it was


def test_a_view_a_composite_op_picks_only_outside_the_dispatch_mode_passes() -> None:
    # matmul of 4-dim tensors folds the transposed operand with reshape, which makes its view
    # with `view` under the dispatch guard's mode and with `_reshape_alias` without one.
    q, k = torch.randn(2, 3, 16, 8), torch.randn(2, 3, 16, 8)
    timed = TimedGuard(DispatchGuard())
    with timed.learning():
        torch.matmul(q, k.transpose(-2, -1))
    with timed:
        torch.matmul(q, k.transpose(-2, -1))
    assert timed.taught and timed.guard.violations == []
    with timed:
        torch.matmul(q, k.transpose(-2, -1)).relu()
    assert [v["detail"].split(" ran ")[0] for v in timed.guard.violations] == ["aten::relu"]


def test_until_a_call_has_passed_the_timed_guard_is_the_dispatch_guard() -> None:
    timed = TimedGuard(DispatchGuard())
    with pytest.raises(GuardViolation, match="aten::relu"):
        with timed:
            torch.relu(X)
    assert not timed.taught and timed.allowed == set()
    timed = TimedGuard(DispatchGuard())
    with timed:  # a call that passes teaches it, as in learning()
        honest_forward(X)
    assert timed.taught
    with timed:
        torch.relu(X)  # recorded now, not raised
    assert [v["rule"] for v in timed.guard.violations] == ["torch_compute_op"]


def test_a_call_the_dispatch_guard_failed_teaches_nothing() -> None:
    timed = TimedGuard(DispatchGuard())
    with pytest.raises(GuardViolation):
        with timed.learning():
            honest_forward(X)
            X + 1
    assert not timed.taught and timed.allowed == set()


def test_ending_or_replacing_the_recording_inside_a_call_is_a_violation() -> None:
    timed = taught_guard()
    with timed:  # the recording the guard began is ended, another begun
        profiler_state._disable_profiler_legacy()
        CallRecord().__enter__()
    with timed:
        profiler_state._disable_profiler_legacy()
    assert [v["rule"] for v in timed.guard.violations] == ["guard_tampered", "guard_tampered"]
    assert "replaced" in timed.guard.violations[0]["detail"]
    assert "ended" in timed.guard.violations[1]["detail"]
    assert profiler_state._profiler_enabled() is False
