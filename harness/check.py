"""Runs the reference Model on the verify input sets and compares the candidate's outputs with
its own (trusted; never shares a process with candidate code). With --timed it recomputes the
timed calls of timing.py instead, from the secret the evaluator revealed for them."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import contextlib
import math
import sys
from types import ModuleType
from typing import Any, Sequence

import torch

import common
import input_sets


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True,
                        help="inputs.json from prepare.py: the verify sets (with --timed, the "
                             "profile sets) are drawn from it")
    parser.add_argument("--candidate-out", required=True,
                        help="candidate_out.pt (with --timed: timing.py's --out bundle)")
    parser.add_argument("--seeded-sets", type=int,
                        help="how many of the verify sets get_inputs() drew (the rest are "
                             "prepare.py's shifted and spiked ones); degeneracy is judged on "
                             "those (default: all)")
    parser.add_argument("--timed", action="store_true",
                        help="check timing.py's timed calls rather than the verify sets")
    parser.add_argument("--secret-file", help="--timed: where the evaluator wrote the secret")
    parser.add_argument("--iters", type=int, help="--timed: timed calls")
    parser.add_argument("--save-calls", type=int, default=2,
                        help="--timed: calls kept in full (default %(default)s)")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--atol", type=float, default=1e-2,
                        help="absolute tolerance (default %(default)s)")
    parser.add_argument("--rtol", type=float, default=1e-2,
                        help="relative tolerance (default %(default)s)")
    return parser


def _mismatch(kind: str, expected: Any, got: Any, detail: str, **value_fields: Any) -> dict:
    fields = {"kind": kind, "index": None, "expected": expected, "got": got,
              "max_abs_diff": None, "mismatched": None, "numel": None, "detail": detail}
    fields.update(value_fields)
    return fields


def compare_output(expected: Any, got: Any, atol: float, rtol: float,
                   device: str = "cpu") -> tuple[dict | None, float | None, float | None]:
    """(mismatch fields or None, max |got - expected|, max relative difference) of one output.

    Values match when |got - expected| <= atol + rtol * |expected| in float64; NaN or Inf on
    either side never matches unless both are the same infinity. The relative difference is
    taken over elements whose expected value is finite and nonzero. The arithmetic runs on
    device (on cuda it takes milliseconds where the cpu takes seconds)."""
    if type(got) is not type(expected):
        e, g = common.type_name(expected), common.type_name(got)
        return _mismatch("type", e, g, f"is a {g} where the reference returns a {e}"), None, None
    if not isinstance(expected, torch.Tensor):
        if got == expected:
            return None, None, None
        return _mismatch("value", expected, got, f"is {got!r}, expected {expected!r}"), None, None
    if got.shape != expected.shape:
        e, g = list(expected.shape), list(got.shape)
        return _mismatch("shape", e, g, f"has shape {g} where the reference has {e}"), None, None
    if got.dtype != expected.dtype:
        e, g = (str(t.dtype).removeprefix("torch.") for t in (expected, got))
        return _mismatch("dtype", e, g, f"has dtype {g} where the reference has {e}"), None, None
    if got.layout != expected.layout:
        e, g = (str(t.layout).removeprefix("torch.") for t in (expected, got))
        return _mismatch("layout", e, g, f"has layout {g} where the reference has {e}"), None, None

    wide = torch.complex128 if expected.is_complex() else torch.float64
    numel = expected.numel()
    max_abs = max_rel = 0.0
    mismatched, first = 0, None
    # A chunk at a time: the float64 copies and the temporaries of the whole of a 2 GiB float16
    # output took 40 GiB of device memory, beside the reference's outputs kept there.
    pairs = zip(*(_widened(t.detach().reshape(-1), wide, device, COMPARE_CHUNK)
                  for t in (expected, got)))
    for (start, e), (_, g) in pairs:
        diff, ok, relative = _compare_chunk(e, g, atol, rtol)
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, relative)
        bad = e.numel() - int(ok.sum())
        if bad and first is None:
            local = int(torch.argmax((~ok).to(torch.uint8)))
            first = (start + local, e[local].item(), g[local].item())
        mismatched += bad
    if mismatched == 0:
        return None, max_abs, max_rel
    position, want, have = first
    index = [int(i) for i in torch.unravel_index(torch.tensor(position), expected.shape)]
    detail = (f"has {mismatched} of {numel} values off by more than atol + rtol*|expected|; "
              f"the first, at {index}, is {have} where {want} is expected")
    fields = _mismatch("value", want, have, detail, index=index, max_abs_diff=max_abs,
                       mismatched=mismatched, numel=numel)
    return fields, max_abs, max_rel


# Elements compare_output compares at once (on the device, in float64).
COMPARE_CHUNK = 1 << 26


def _widened(flat: torch.Tensor, wide: torch.dtype, device: str, size: int):
    """(offset, chunk) for each size elements of flat, the chunk moved to the device, then
    widened to wide: widening on the host first would move twice the bytes, slowly."""
    for start in range(0, flat.numel(), size):
        yield start, common.upload(flat[start:start + size], device).to(wide)


def _compare_chunk(e: torch.Tensor, g: torch.Tensor, atol: float,
                   rtol: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(|g - e| with a mismatch of finiteness as inf, which elements match, the largest relative
    difference over elements whose expected value is finite and nonzero) of one chunk."""
    if bool(torch.isfinite(e).all()) and bool(torch.isfinite(g).all()):
        # Every value finite, as nearly always: the same test in half the passes over memory.
        diff = (g - e).abs()
        scale = e.abs()
        ok = diff <= scale * rtol + atol
        return diff, ok, float(torch.where(scale != 0, diff / scale, 0.0).max())
    finite = torch.isfinite(e) & torch.isfinite(g)
    same_inf = torch.isinf(e) & (g == e)
    diff = torch.where(finite, (g - e).abs(), torch.where(same_inf, 0.0, torch.inf))
    ok = (finite & (diff <= atol + rtol * e.abs())) | same_inf
    relative = torch.isfinite(e) & (e != 0)
    max_rel = float((diff[relative] / e[relative].abs()).max()) if bool(relative.any()) else 0.0
    return diff, ok, max_rel


def compare_sets(expected: list[list], got: list[list], atol: float, rtol: float,
                 device: str = "cpu") -> dict:
    """Report fields sets, max_abs_diff, max_rel_diff and mismatch (the first one found)."""
    max_abs: float | None = None
    max_rel: float | None = None
    mismatch = None
    for k, (want, have) in enumerate(zip(expected, got)):
        if len(have) != len(want):
            mismatch = mismatch or {"set": k, "output": None, **_mismatch(
                "count", len(want), len(have),
                f"set {k} has {len(have)} outputs where the reference returns {len(want)}")}
            continue
        for j, (e, g) in enumerate(zip(want, have)):
            found, abs_diff, rel_diff = compare_output(e, g, atol, rtol, device)
            if abs_diff is not None:
                max_abs = abs_diff if max_abs is None else max(max_abs, abs_diff)
                max_rel = rel_diff if max_rel is None else max(max_rel, rel_diff)
            if found is not None and mismatch is None:
                found["detail"] = f"set {k} output {j} {found['detail']}"
                mismatch = {"set": k, "output": j, **found}
    return {"sets": len(expected), "max_abs_diff": max_abs, "max_rel_diff": max_rel,
            "mismatch": mismatch}


def find_modified_input(original: Sequence[list], after: list[list]) -> dict | None:
    """The first input (set, index) whose value after the candidate's call differs at all. A
    set of original is read only where the candidate's process found one of its inputs
    changed."""
    for k, now in enumerate(after):
        # None: the candidate's process found this input unchanged (run_candidate.py).
        changed = [j for j, value_after in enumerate(now) if value_after is not None]
        if not changed:
            continue
        before = original[k]
        for j in changed:
            if not common.identical(before[j], now[j]):
                return {"set": k, "input": j}
    return None


def read_candidate_bundle(path: str) -> dict:
    try:
        bundle = common.load_bundle(path)
    except Exception as error:
        raise common.Failure(f"the candidate's outputs {path} cannot be read: "
                             f"{type(error).__name__}: {error}", "candidate_output") from error
    if not isinstance(bundle, dict):
        raise common.Failure(f"the candidate's outputs {path} are not a dictionary",
                             "candidate_output")
    return bundle


def load_candidate_outputs(path: str, arity: list[int]) -> tuple[list, list, list]:
    """(outputs per set, inputs after the call per set, the rerun of set 0's outputs); arity:
    how many inputs each verify set has."""
    bundle = read_candidate_bundle(path)
    outputs, after, rerun = bundle.get("outputs"), bundle.get("inputs_after"), bundle.get("rerun")
    n = len(arity)
    well_formed = (isinstance(outputs, list) and isinstance(after, list)
                   and isinstance(rerun, list)
                   and len(outputs) == n and len(after) == n
                   and all(isinstance(o, list) for o in outputs)
                   and all(isinstance(a, list) and len(a) == count
                           for a, count in zip(after, arity)))
    if not well_formed:
        raise common.Failure(f"the candidate's outputs {path} are not {n} sets of "
                             "{outputs, inputs_after} and a rerun", "candidate_output")
    return outputs, after, rerun


# --- degenerate tasks (S4, S13): outputs a candidate could match without computing them ------


# Elements compared at once: a multi-gigabyte output is never copied whole into float64.
CHUNK = 1 << 24


def _chunks(tensor: torch.Tensor, device: str):
    """The tensor's elements (a complex one's real and imaginary parts) in float64 chunks, each
    moved to the device, wherever the tensor itself lives (on cuda this takes tenths of a second
    for a gigabyte where the cpu takes seconds)."""
    flat = tensor.detach()
    if flat.is_complex():
        flat = torch.view_as_real(flat)
    for _, chunk in _widened(flat.reshape(-1), torch.float64, device, CHUNK):
        yield chunk


def _finite(tensor: torch.Tensor, device: str) -> bool:
    return all(bool(torch.isfinite(chunk).all()) for chunk in _chunks(tensor, device))


def _within(expected: torch.Tensor, got: torch.Tensor | float, atol: float, rtol: float,
            device: str) -> bool:
    """Whether expected is finite and got (a tensor of its shape, or one number) is within
    atol + rtol * |expected| of it everywhere."""
    got_chunks = _chunks(got, device) if isinstance(got, torch.Tensor) else None
    for e in _chunks(expected, device):
        g = next(got_chunks) if got_chunks is not None else got
        if not bool(torch.isfinite(e).all()) or not bool(((g - e).abs() <=
                                                           atol + rtol * e.abs()).all()):
            return False
    return True


def trivial_output(j: int, expected: list[list], sets: Sequence[list], atol: float,
                   rtol: float, device: str = "cpu") -> str | None:
    """Why output j of the reference could be matched without computing it, or None: it is one
    constant (within tolerance) on every set, it is the same tensor whatever the inputs, or it
    is one of the inputs."""
    values = [outputs[j] for outputs in expected]
    if not all(isinstance(v, torch.Tensor) and v.numel() > 0 for v in values):
        return None
    if not all(_finite(v, device) for v in values):
        return None
    low = min(min(float(c.min()) for c in _chunks(v, device)) for v in values)
    high = max(max(float(c.max()) for c in _chunks(v, device)) for v in values)
    middle = (low + high) / 2
    if all(_within(v, middle, atol, rtol, device) for v in values):
        return f"is within tolerance of the constant {middle:.6g} on every input set"
    if len(values) > 1 and all(v.shape == values[0].shape
                               and _within(v, values[0], atol, rtol, device)
                               for v in values[1:]):
        return "is the same on every input set: it does not depend on the inputs"
    for i in range(len(sets[0])):
        if all(isinstance(inputs[i], torch.Tensor) and inputs[i].shape == v.shape
               and _within(v, inputs[i], atol, rtol, device)
               for inputs, v in zip(sets, values)):
            return f"is within tolerance of input {i} on every input set"
    return None


def find_degenerate(expected: list[list], sets: Sequence[list], atol: float,
                    rtol: float, device: str = "cpu") -> dict | None:
    """The task is degenerate when every output is trivial: a candidate that computes nothing
    would pass, so no verdict on a candidate means anything."""
    if not expected or not expected[0]:
        return None
    reasons = [trivial_output(j, expected, sets, atol, rtol, device)
               for j in range(len(expected[0]))]
    if any(reason is None for reason in reasons):
        return None
    return {"output": 0, "detail": f"the task's output 0 {reasons[0]}; a candidate that "
                                   "computes nothing would pass, so the task cannot verify one"}


# --- timed calls -------------------------------------------------------------------------------


def check_timed(task: ModuleType, init: dict, device_sets: list[list], bundle: dict, args: Any,
                report: dict) -> None:
    """Recomputes every timed call of timing.py with the reference: the fingerprints of each
    call's outputs must be within what atol and rtol allow, the kept outputs must match in
    full. Reports "timed": {"calls", "kept", "mismatch"}."""
    with open(args.secret_file) as f:
        secret = int(f.read().strip(), 16)
    plan = common.TimedPlan(secret, args.iters, len(device_sets), args.save_calls)
    fingerprints, saved, kept = (bundle.get(k) for k in ("fingerprints", "saved", "outputs"))
    if not (isinstance(fingerprints, list) and len(fingerprints) == args.iters
            and saved == plan.saved and isinstance(kept, list) and len(kept) == len(plan.saved)):
        raise common.Failure("the timed calls' bundle does not hold a fingerprint for each of "
                             f"the {args.iters} calls and the outputs of calls {plan.saved}",
                             "candidate_output")
    try:
        model, _ = common.build_model(task.Model, init, args.init_seed, args.device)
    except Exception as error:
        raise common.TaskError(f"building the task's Model failed: {error}") from error
    mismatch = None
    for i in range(args.iters):
        try:
            expected = common.output_list(model(*plan.inputs(device_sets, i)))
            common.synchronize(args.device)
        except Exception as error:
            raise common.TaskError(f"the task's Model failed on timed call {i}: "
                                   f"{type(error).__name__}: {error}") from error
        mismatch = compare_fingerprints(i, plan, expected, fingerprints[i], args)
        if mismatch is None and i in plan.saved:
            got = kept[plan.saved.index(i)]
            if not isinstance(got, list) or len(got) != len(expected):
                mismatch = {"call": i, "output": None, "detail": f"timed call {i} kept "
                            f"{len(got) if isinstance(got, list) else 'no'} outputs where the "
                            f"reference returns {len(expected)}"}
            else:
                for j, (e, g) in enumerate(zip(expected, got)):
                    found, _, _ = compare_output(e, g, args.atol, args.rtol, args.device)
                    if found is not None:
                        mismatch = {"call": i, "output": j,
                                    "detail": f"timed call {i} output {j} {found['detail']}"}
                        break
        if mismatch is not None:
            break
    report["timed"] = {"calls": args.iters, "kept": plan.saved, "mismatch": mismatch}


# Rounding of the sums, relative to the sum of magnitudes plus one: float32 accumulation over up
# to 2^30 terms in the order the device's reduction takes (blocks of partial sums, then a tree)
# stays orders of magnitude inside it; float64's inside FINGERPRINT_SLACK_64.
FINGERPRINT_SLACK = 1e-5
FINGERPRINT_SLACK_64 = 1e-9


def fingerprint_sums(plan: common.TimedPlan, j: int, expected: torch.Tensor,
                     flat: torch.Tensor, atol: float,
                     rtol: float) -> tuple[list, list, float] | None:
    """(sum and weighted sum of output j of the reference, how far each may be off when every
    element is within atol + rtol*|e|, the rounding slack), accumulated in the dtype of flat,
    the output's fingerprint_view, as timing.py's fingerprints are; None where the sum of
    magnitudes is not finite there. The limits expand algebraically, sum(atol + rtol*|e|) and
    sum((atol + rtol*|e|) * |w|), so that no bound tensor is built: five reads of the output's
    size, where the bound in float64 took over twenty."""
    weights = plan.weights(j, expected)
    magnitudes, magnitude_sum = plan.weight_magnitudes(j, expected)
    absolute = flat.abs()
    total, weighted, abs_sum, abs_weighted = torch.stack(
        [flat.sum(), torch.dot(flat, weights), absolute.sum(),
         torch.dot(absolute, magnitudes)]).tolist()
    if not math.isfinite(abs_sum):
        return None
    slack = (FINGERPRINT_SLACK_64 if flat.dtype == torch.float64 else FINGERPRINT_SLACK) * (
        abs_sum + 1.0)
    limits = [atol * flat.numel() + rtol * abs_sum, atol * magnitude_sum + rtol * abs_weighted]
    return [total, weighted], limits, slack


def compare_fingerprints(i: int, plan: common.TimedPlan, expected: list, got: Any,
                         args: Any) -> dict | None:
    """A call's fingerprints against the reference's. When every element is within atol +
    rtol*|e|, each weighted sum is within the same weighted sum of those bounds; outside it,
    some element is not."""
    if not isinstance(got, list) or len(got) != len(expected):
        return {"call": i, "output": None, "detail": f"timed call {i} returned "
                f"{len(got) if isinstance(got, list) else 'no'} outputs where the reference "
                f"returns {len(expected)}"}
    for j, (e, pair) in enumerate(zip(expected, got)):
        if not isinstance(e, torch.Tensor):
            continue
        flat = common.fingerprint_view(e)
        found = fingerprint_sums(plan, j, e, flat, args.atol, args.rtol)
        if found is None and not bool(torch.isfinite(flat).all()):
            continue  # the reference itself is not finite here: nothing to hold the call to
        # found is None for a finite reference whose sums leave float32's range (magnitudes
        # past 1e29 or so): its sampled elements and the kept calls still hold it.
        if found is not None:
            sums, limits, slack = found
            ok = (isinstance(pair, list) and len(pair) == 3
                  and all(isinstance(v, float) and math.isfinite(v) for v in pair[:2])
                  and all(abs(v - s) <= limit + slack
                          for v, s, limit in zip(pair, sums, limits)))
            if not ok:
                return {"call": i, "output": j, "detail": f"timed call {i} output {j} does "
                        f"not match the reference: its fingerprint is "
                        f"{pair[:2] if isinstance(pair, list) else pair} where {sums} (within "
                        f"{limits}) is expected; outputs of timed calls are recomputed"}
        if not (isinstance(pair, list) and len(pair) == 3):
            return {"call": i, "output": j, "detail": f"timed call {i} output {j}: its "
                    f"fingerprint is missing from the timing report"}
        expected_samples = flat[plan.positions(j, flat.numel()).to(flat.device)].cpu().tolist()
        got = pair[2]
        if not (isinstance(got, list) and len(got) == len(expected_samples)
                and all(isinstance(v, float) for v in got)):
            return {"call": i, "output": j, "detail": f"timed call {i} output {j}: its sampled "
                    f"elements are missing from the timing report"}
        for k, (v, e) in enumerate(zip(got, expected_samples)):
            if not (math.isfinite(v) and abs(v - e) <= args.atol + args.rtol * abs(e)):
                return {"call": i, "output": j, "detail": f"timed call {i} output {j} does not "
                        f"match the reference: sampled element {k} is {v} where {e} is "
                        f"expected; outputs of timed calls are recomputed"}
    return None


# Share of the device's free memory the reference's outputs may keep there, for the comparisons
# to read them in place; beyond it they go to the host.
DEVICE_OUTPUT_SHARE = 0.25


def run_reference(task: ModuleType, init: dict, sets: Sequence[list], init_seed: int,
                  device: str) -> list[list]:
    """The reference's outputs of each set: left on the device while they fit (so that the
    checks that follow read them there), copied to the host otherwise."""
    try:
        model, _ = common.build_model(task.Model, init, init_seed, device)
        results = []
        for inputs in sets:
            outputs = common.output_list(model(*common.to_device(inputs, device)))
            common.synchronize(device)
            kept = (device == "cuda" and common.tensor_bytes(outputs)
                    < DEVICE_OUTPUT_SHARE * torch.cuda.mem_get_info()[0])
            results.append(common.detached(outputs) if kept else common.to_cpu(outputs))
        return results
    except Exception as error:
        raise common.TaskError(f"the task's Model failed: {type(error).__name__}: {error}") \
            from error


@contextlib.contextmanager
def candidate_outputs_at_fault():
    """A comparison that raises is the candidate's output's doing (error_kind
    "candidate_output"), unless the device ran out of memory or a verdict was already reached
    (a Failure): the evaluator counts the former against the candidate and the latter against
    itself, and a candidate must not turn its failure into no verdict at all."""
    try:
        yield
    except (common.Failure, torch.OutOfMemoryError):
        raise
    except Exception as error:
        if "out of memory" in str(error):
            raise
        raise common.Failure(f"the candidate's outputs could not be compared with the "
                             f"reference's: {type(error).__name__}: {error}",
                             "candidate_output") from error


def main(args: Any, report: dict) -> None:
    init = common.load_bundle(args.init)
    task = common.load_task(args.task)
    common.shrink_task(task, args.shrink)
    sets = input_sets.InputSets(args.inputs, task, args.device)
    if args.timed:
        if not args.secret_file or args.iters is None or args.iters < 1:
            raise common.UsageError("--timed needs --secret-file and --iters")
        bundle = read_candidate_bundle(args.candidate_out)
        with common.step(report, "recompute"):
            profile = [sets.profile(k) for k in range(sets.profile_count)]
            with candidate_outputs_at_fault():
                check_timed(task, init, profile, bundle, args, report)
        return
    count = sets.verify_count
    outputs, inputs_after, rerun = load_candidate_outputs(
        args.candidate_out, [sets.arity(k) for k in range(count)])
    with common.step(report, "reference"):
        expected = run_reference(task, init, sets.verify_sets(), args.init_seed, args.device)
    # A task is degenerate on the inputs it describes: a shifted or spiked set may make an
    # almost-constant output vary, but a candidate that computes nothing still passes the rest.
    seeded = min(args.seeded_sets or sets.seeded, count)
    with common.step(report, "degenerate"):
        report["degenerate"] = find_degenerate(expected[:seeded], sets.verify_sets(seeded),
                                               args.atol, args.rtol, args.device)
    with common.step(report, "compare"), candidate_outputs_at_fault():
        report.update(compare_sets(expected + [expected[0]], outputs + [rerun], args.atol,
                                   args.rtol, args.device))
    if report["mismatch"] is not None and report["mismatch"]["set"] == count:
        mismatch = report["mismatch"]
        mismatch["detail"] = mismatch["detail"].replace(
            f"set {count} ", "set 0, run again on a fresh ModelNew over differently "
            "poisoned memory, ", 1)
    report["sets"] = count
    with common.step(report, "inputs_modified"):
        report["inputs_modified"] = find_modified_input(sets.verify_sets(), inputs_after)
    report["correct"] = report["mismatch"] is None and report["inputs_modified"] is None


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
