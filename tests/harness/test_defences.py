"""The harness's defences one by one: the timed plan and its fingerprints, degenerate tasks, and
the watch over the candidate's process."""

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import check
import common
import watch

ATOL = RTOL = 1e-2


def test_the_timed_plan_is_a_function_of_the_secret() -> None:
    one, same, other = (common.TimedPlan(s, 20, 4, 2) for s in (7, 7, 8))
    assert one.scales == same.scales and one.saved == same.saved
    assert one.scales != other.scales
    assert len(one.saved) == 2 and all(0 <= i < 20 for i in one.saved)
    assert all(0.5 <= s < 1.0 for s in one.scales)
    assert len(set(one.scales)) == 20  # no two calls see the same values


def test_timed_inputs_are_fresh_scaled_copies_and_leave_integers_alone() -> None:
    base = [[torch.randn(64, 64), torch.arange(5), 3]]
    plan = common.TimedPlan(1, 3, 1, 0)
    first, second = plan.inputs(base, 0), plan.inputs(base, 1)
    assert first[0].data_ptr() != base[0][0].data_ptr()
    # Each element scaled by the call's factor times its own, within the jitter.
    ratio = first[0] / base[0][0] / plan.scales[0]
    assert float(ratio.min()) > 1 - 2 * plan.JITTER - 1e-6
    assert float(ratio.max()) <= 1 + 1e-6  # no value grows
    # Not one factor for the whole tensor: an output recorded in warm-up cannot be rescaled.
    assert float(ratio.std()) > plan.JITTER / 4
    assert not torch.allclose(first[0], second[0])
    # The same secret gives the same inputs, as check.py --timed needs.
    assert torch.equal(common.TimedPlan(1, 3, 1, 0).inputs(base, 0)[0], first[0])
    assert torch.equal(first[1], base[0][1]) and first[1].data_ptr() != base[0][1].data_ptr()
    assert first[2] == 3


def _fingerprint_check(plan, expected, got_outputs):
    args = SimpleNamespace(atol=ATOL, rtol=RTOL)
    return check.compare_fingerprints(0, plan, expected, plan.fingerprint(got_outputs), args)


def test_fingerprints_accept_outputs_within_tolerance_and_refuse_wrong_ones() -> None:
    torch.manual_seed(0)
    plan = common.TimedPlan(3, 1, 1, 0)
    expected = [torch.randn(64, 64)]
    bound = ATOL + RTOL * expected[0].abs()
    # Every element off by almost its whole tolerance, all in one direction: still correct.
    assert _fingerprint_check(plan, expected, [expected[0] + 0.99 * bound]) is None
    assert _fingerprint_check(plan, expected, [expected[0] - 0.99 * bound]) is None
    stale = [torch.randn(64, 64)]
    found = _fingerprint_check(plan, expected, stale)
    assert found is not None and found["call"] == 0 and found["output"] == 0
    shifted = [expected[0] + 3 * bound]
    assert _fingerprint_check(plan, expected, shifted) is not None
    nan = [expected[0].clone()]
    nan[0][5, 5] = float("nan")
    assert _fingerprint_check(plan, expected, nan) is not None


def test_another_calls_output_of_the_same_statistics_is_caught_by_the_sampled_elements() -> None:
    # A kernel that skips its work leaves the output buffer as the allocator hands it back:
    # often another call's output, whose sums agree with this call's within the aggregate of the
    # elementwise tolerances at a large size. The sampled elements hold it to them one by one.
    torch.manual_seed(1)
    plan = common.TimedPlan(7, 1, 1, 0)
    bias = torch.randn(512)
    expected = [torch.relu(torch.randn(512, 512) * 0.9 + bias)]
    stale = [torch.relu(torch.randn(512, 512) * 0.9 + bias)]
    found = _fingerprint_check(plan, expected, stale)
    assert found is not None and "sampled element" in found["detail"], found
    assert _fingerprint_check(plan, expected, [expected[0].clone()]) is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64,
                                   torch.complex64, torch.int32])
def test_fingerprints_of_every_dtype_hold_the_output_to_the_tolerances(dtype) -> None:
    # Summed in float32 (float64 for 64-bit outputs) by timing.py and check.py alike.
    torch.manual_seed(4)
    plan = common.TimedPlan(5, 1, 1, 0)
    wide = torch.randn(128, 96, dtype=torch.complex128 if dtype.is_complex else torch.float64)
    if not (dtype.is_floating_point or dtype.is_complex):
        wide = wide.real.mul(1000).round()
    expected = [wide.to(dtype)]
    assert _fingerprint_check(plan, expected, [expected[0].clone()]) is None
    assert _fingerprint_check(plan, expected, [(wide + 3 * (ATOL + RTOL * wide.abs())).to(dtype)]) \
        is not None
    assert _fingerprint_check(plan, expected, [torch.roll(expected[0], 1, 0)]) is not None


def test_a_reference_too_large_for_float32_sums_is_held_by_its_sampled_elements() -> None:
    # Magnitudes near float32's largest: the sums leave its range; the call is still held to
    # the sampled elements (and the kept calls to every element).
    torch.manual_seed(5)
    plan = common.TimedPlan(9, 1, 1, 0)
    expected = [torch.rand(64, 64) * 3e37 + 1e37]
    assert _fingerprint_check(plan, expected, [expected[0].clone()]) is None
    found = _fingerprint_check(plan, expected, [expected[0].flip(0)])
    assert found is not None and "sampled element" in found["detail"], found


def test_timed_inputs_keep_their_dtype() -> None:
    base = [[torch.randn(32, dtype=torch.float16), torch.randn(8, dtype=torch.complex64),
             torch.randn(4, 4).t()]]
    half, complex_, transposed = common.TimedPlan(2, 1, 1, 0).inputs(base, 0)
    assert half.dtype == torch.float16 and complex_.dtype == torch.complex64
    assert transposed.stride() == base[0][2].stride()  # laid out as the set is
    ratio = (complex_ / base[0][1]).real
    assert float(ratio.min()) > 0.5 * (1 - 2 * common.TimedPlan.JITTER) - 1e-6


def test_fingerprints_refuse_a_wrong_count_of_outputs() -> None:
    plan = common.TimedPlan(3, 1, 1, 0)
    expected = [torch.ones(4), torch.ones(4)]
    found = _fingerprint_check(plan, expected, [torch.ones(4)])
    assert found is not None and "returned 1 outputs" in found["detail"]


def sets(*tensors_per_set):
    return [list(t) for t in tensors_per_set]


@pytest.mark.parametrize("name, make_expected, why", [
    ("tiny", lambda x: x * 1e-5, "within tolerance of the constant"),
    ("constant", lambda x: torch.full_like(x, 3.0), "within tolerance of the constant"),
    ("pass-through", lambda x: x + 1e-5, "within tolerance of input 0"),
])
def test_degenerate_tasks_are_found(name, make_expected, why) -> None:
    torch.manual_seed(1)
    inputs = sets(*[(torch.randn(32, 32),) for _ in range(3)])
    expected = [[make_expected(s[0])] for s in inputs]
    found = check.find_degenerate(expected, inputs, ATOL, RTOL)
    assert found is not None and why in found["detail"], name


def test_an_output_independent_of_the_inputs_is_degenerate() -> None:
    torch.manual_seed(2)
    weight = torch.randn(8, 8)
    inputs = sets(*[(torch.randn(8, 8),) for _ in range(3)])
    found = check.find_degenerate([[weight.clone()] for _ in inputs], inputs, ATOL, RTOL)
    assert found is not None and "does not depend on the inputs" in found["detail"]


def test_a_real_task_is_not_degenerate_even_with_one_trivial_output() -> None:
    torch.manual_seed(3)
    inputs = sets(*[(torch.randn(32, 32),) for _ in range(3)])
    expected = [[torch.relu(s[0]), torch.zeros(4)] for s in inputs]
    assert check.find_degenerate(expected, inputs, ATOL, RTOL) is None


@pytest.fixture
def watched():
    violations: list = []
    yield watch.Watch("cpu", violations), violations
    watch.pin_precision("fp32")


def test_the_watch_sees_a_patched_timer_and_names_it(watched, monkeypatch) -> None:
    w, violations = watched
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    w.check("in the test")
    assert [v["rule"] for v in violations] == ["harness_tampered"]
    assert "time.perf_counter_ns" in violations[0]["detail"]


def test_the_watch_sees_a_patched_tensor_method(watched, monkeypatch) -> None:
    w, violations = watched
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: self)
    w.check("in the test")
    assert [v["rule"] for v in violations] == ["harness_tampered"]
    assert "torch.Tensor.cpu" in violations[0]["detail"]


def test_the_watch_ignores_plain_data_that_changes(watched, monkeypatch) -> None:
    w, violations = watched
    monkeypatch.setattr(torch, "_cuda_agent_test_flag", 1, raising=False)
    w.check("in the test")
    assert violations == []


def test_the_watch_sees_tf32_switched_on_and_pins_it_back(watched) -> None:
    w, violations = watched
    torch.set_float32_matmul_precision("medium")
    w.check("in the test")
    assert [v["rule"] for v in violations] == ["precision_changed"]
    assert torch.get_float32_matmul_precision() == "highest"


def test_the_watch_holds_a_candidate_to_a_tf32_pin_too() -> None:
    violations: list = []
    watch.pin_precision("tf32")
    try:
        w = watch.Watch("cpu", violations)
        w.check("in the test")
        assert violations == []
        torch.set_float32_matmul_precision("medium")
        w.check("in the test")
        assert [v["rule"] for v in violations] == ["precision_changed"]
        assert "pins tf32 precision" in violations[0]["detail"]
        assert torch.get_float32_matmul_precision() == "high"  # pinned back to the pin
    finally:
        watch.pin_precision("fp32")


def test_the_watch_sees_a_python_thread_left_running(watched) -> None:
    w, violations = watched
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="late-writer")
    worker.start()
    try:
        w.check("after the call")
    finally:
        stop.set()
        worker.join()
    assert [v["rule"] for v in violations] == ["background_thread"]
    assert "late-writer" in violations[0]["detail"]


def test_the_watch_sees_a_native_thread_still_working(watched) -> None:
    w, violations = watched
    stop = threading.Event()

    def spin() -> None:  # a busy thread, as a detached C++ thread finishing the work would be
        while not stop.is_set():
            sum(range(1000))

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        for _ in range(5):  # on a loaded machine the spinning thread may miss one window
            w.check_threads_idle("after the call")
            if violations:
                break
    finally:
        stop.set()
        worker.join()
    assert [v["rule"] for v in violations] == ["background_thread"]


def test_the_watch_passes_an_idle_process(watched) -> None:
    w, violations = watched
    w.check_threads_idle("after the call")
    w.check("after the call")
    assert violations == []


def observed(call) -> list:
    violations: list = []
    with watch.CallObserver("cpu", "/nonexistent", violations):
        call()
    return violations


def test_the_profiler_sees_torch_compute_run_past_the_guard() -> None:
    x = torch.randn(16, 16)

    def bypass():
        with torch._C._DisableTorchDispatch():
            return torch.relu(x) * 2

    found = observed(bypass)
    assert [v["rule"] for v in found] == ["torch_compute_op"]
    assert "aten::clamp_min" in found[0]["detail"] or "aten::relu" in found[0]["detail"]


def test_the_profiler_lets_allocation_views_and_library_ops_pass() -> None:
    x, w = torch.randn(16, 16), torch.randn(8, 16)

    def honest():
        y = torch.empty_like(x).view(-1)
        z = torch.zeros(4)
        return torch.mm(x, w.t()), torch.addmm(torch.zeros(16, 8), x, w.t()), y, z

    assert observed(honest) == []


def test_kernel_identifiers_are_what_a_mangled_symbol_contains() -> None:
    name = "void ns::scale_relu<4>(float const*, float*, long)"
    assert watch.kernel_identifier(name) == "scale_relu"
    assert watch.kernel_identifier("triton_poi_fused_relu_0") == "triton_poi_fused_relu_0"


def op(name: str, kernels: tuple[str, ...] = (), children: tuple = ()) -> SimpleNamespace:
    """A profiler function event as the observer reads it."""
    return SimpleNamespace(name=name, kernels=[SimpleNamespace(name=k) for k in kernels],
                           cpu_children=list(children))


def test_kernels_a_library_op_launches_are_the_librarys_whatever_their_names() -> None:
    # cuDNN flips the filter with a kernel of its own before a convolution; torch's bias add
    # inside aten::_convolution is part of the op as well.
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
    conv = op("aten::conv2d", children=(
        op("aten::convolution", children=(op("aten::_convolution", children=(
            op("aten::cudnn_convolution", ("flip_filter<float, float>", "sm90_xmma_fprop")),
            op("aten::add_", (add,)))),)),))
    by_library = watch.library_launched([conv, op("aten::relu", ("relu_kernel",))])
    assert by_library == {"flip_filter<float, float>": 1, "sm90_xmma_fprop": 1, add: 1}
    ran = ["flip_filter<float, float>", "sm90_xmma_fprop", add, "fused_epilogue(float*)"]
    assert watch.first_foreign_kernel(ran, by_library, b"fused_epilogue") is None


def test_a_library_ops_launches_do_not_excuse_the_same_kernel_run_again_outside_it() -> None:
    by_library = watch.library_launched([op("aten::mm", ("flip_filter<float, float>",))])
    ran = ["flip_filter<float, float>", "flip_filter<float, float>"]
    assert watch.first_foreign_kernel(ran, by_library, b"") == "flip_filter<float, float>"
    assert watch.first_foreign_kernel(["triton_poi_fused_relu_0"], by_library, b"") \
        == "triton_poi_fused_relu_0"
    assert watch.first_foreign_kernel(["memcpy HtoD", "ampere_sgemm_128x64_nn"], by_library,
                                      b"") is None


def test_a_thread_started_by_the_call_that_ends_after_its_return_is_caught(watched) -> None:
    w, violations = watched
    started, returned = threading.Event(), threading.Event()

    def late_writer() -> None:  # as a detached C++ thread would: alive at the return, then done
        started.set()
        returned.wait()  # alive at the return however slowly this machine runs it

    worker = threading.Thread(target=late_writer)
    worker.start()
    started.wait()
    w.returned()
    returned.set()
    w.check_threads_idle("after the call")
    worker.join()
    assert [v["rule"] for v in violations] == ["background_thread"]


def test_a_thread_already_exiting_at_the_return_is_not_work(watched) -> None:
    # A thread the call joined can still be listed at the return while the kernel tears it
    # down; one alive and not exiting then, and gone by the end, did its work after the return.
    w, violations = watched
    gone = max(watch._tids()) + 1_000_000  # no such thread at the end of the window
    w._at_return = {gone: (1_000, True, True)}
    w.check_threads_idle("after the call")
    assert violations == []
    w._at_return = {gone: (1_000, True, False)}
    w.check_threads_idle("after the next call")
    assert [v["rule"] for v in violations] == ["background_thread"]


_SCRIPTED = itertools.count()


def scripted_thread(monkeypatch, samples: list[tuple[int, bool]], started_by_call=False):
    """A native thread whose CPU time (ns since the return) and runnable state the watch reads
    from samples, one per look after the window's end (the last repeats); None: it has ended."""
    tid = max(watch._tids()) + 1_000_000 + next(_SCRIPTED)  # never one scripted before
    looks = iter(samples)
    current = [next(looks)]

    def advance() -> None:
        current[0] = next(looks, current[0])

    real_tids = watch._tids
    monkeypatch.setattr(watch, "_tids", lambda: real_tids() | ({tid} if current[0] else set()))
    monkeypatch.setattr(watch, "_cpu_ns", lambda t: 1_000 + current[0][0] if t == tid else 0)

    def state(t: int) -> tuple[bool, bool]:
        if t != tid:
            return False, False
        running = current[0][1]
        advance()  # the watch reads the CPU time, then the state: the next look is later
        return running, False

    monkeypatch.setattr(watch, "_state", state)
    return tid


@pytest.mark.parametrize("later,working", [
    ([(15_000, True), (20_000, False)], False),  # got a CPU late, then went back to sleep
    ([(15_000, True)], True),                     # runnable throughout the longer watch
    ([(15_000, True), (900_000, True)], True),    # on a CPU, working, once it got one
    ([(15_000, True), None], True),               # started by the call, then ended
])
def test_a_thread_runnable_at_both_ends_of_a_loaded_window_is_watched_until_it_sleeps(
        watched, monkeypatch, later, working) -> None:
    # At the return it is waiting for a CPU; 2 ms later it has had 10 us of one and is runnable
    # again (a worker on its way back to sleep on a loaded machine, or one doing the work).
    w, violations = watched
    for call in ("after the call", "after the next call"):  # working after both is refused
        tid = scripted_thread(monkeypatch, [(10_000, True), *later])
        w._at_return = {tid: (1_000, True, False)}
        w.check_threads_idle(call)
        if violations:
            break
    assert [v["rule"] for v in violations] == (["background_thread"] if working else [])


def test_a_thread_on_a_cpu_after_one_call_only_is_not_refused(watched, monkeypatch) -> None:
    # 0.9 ms on a CPU in the window after one call, then idle after the others: a worker whose
    # virtual CPU the host took on its way back to sleep. After a second such call it is work.
    w, violations = watched
    for busy in (900_000, 0, 0):
        tid = scripted_thread(monkeypatch, [(busy, False)])
        w._at_return = {tid: (1_000, True, False)}
        w.check_threads_idle("after the call")
    assert violations == []
    tid = scripted_thread(monkeypatch, [(900_000, False)])
    w._at_return = {tid: (1_000, True, False)}
    w.check_threads_idle("after the fourth call")
    assert [v["rule"] for v in violations] == ["background_thread"]
    assert "after the fourth call" in violations[0]["detail"]
    assert "as thread" in violations[0]["detail"] and "after the call (0.90 ms" in \
        violations[0]["detail"]


@pytest.mark.parametrize("before_the_candidate", [True, False])
def test_the_cuda_drivers_own_thread_is_not_the_candidates_work(monkeypatch,
                                                               before_the_candidate) -> None:
    # The driver's event handler may wake just after a call returns; a thread of that name that
    # the candidate's code started is watched like any other.
    violations: list = []
    w = None if before_the_candidate else watch.Watch("cpu", violations)
    tid = scripted_thread(monkeypatch, [(900_000, True)])  # 0.9 ms on a CPU after the return
    monkeypatch.setattr(watch, "_thread_name",
                        lambda t: "cuda-EvtHandlr" if t == tid else "python3")
    w = w or watch.Watch("cpu", violations)
    for call in ("after the call", "after the next call"):
        w._at_return = {tid: (1_000, True, False)}
        w.check_threads_idle(call)
    assert [v["rule"] for v in violations] == ([] if before_the_candidate
                                                else ["background_thread"])
    watch.pin_precision("fp32")


PROFILED_CALL = """
import os, sys, torch
sys.path.insert(0, {harness!r})
import watch
if {started}:
    watch.CallObserver.start_profiler("cpu")
before = set(os.listdir("/proc/self/task"))
with watch.CallObserver("cpu", "/nonexistent", []):
    torch.ones(4).add_(1)
print(len(set(os.listdir("/proc/self/task")) - before))
"""


@pytest.mark.parametrize("started", [False, True])
def test_the_profilers_own_thread_is_started_before_the_candidate_runs(started) -> None:
    # The profiled rerun in run_candidate.py must not start a thread of torch's profiler that
    # the watch would then find starting up after the candidate's call returned.
    script = PROFILED_CALL.format(harness=str(Path(watch.__file__).parent), started=started)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    new_threads = int(result.stdout.split()[-1])
    assert (new_threads == 0) == started


def test_a_thread_pool_started_by_the_call_that_sleeps_is_not_work(watched) -> None:
    w, violations = watched
    stop = threading.Event()
    pool = threading.Thread(target=stop.wait, daemon=True)  # an idle OpenMP worker, natively
    pool.start()
    w._python_threads.add(pool.ident)  # only its native side is under test here
    try:
        w.returned()
        w.check_threads_idle("after the call")
        w.returned()
        w.check_threads_idle("after the next call")
    finally:
        stop.set()
        pool.join()
    assert violations == []
