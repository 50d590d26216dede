"""Runs the reference Model on the verify input sets and compares the candidate's outputs with
its own (trusted; never shares a process with candidate code)."""

import faulthandler

faulthandler.enable()

import sys
from types import ModuleType
from typing import Any

import torch

import common


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True, help="verify_inputs.pt from prepare.py")
    parser.add_argument("--candidate-out", required=True, help="candidate_out.pt")
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

    wide = torch.complex128 if expected.is_complex() else torch.float64
    e, g = expected.to(device=device, dtype=wide), got.to(device=device, dtype=wide)
    finite = torch.isfinite(e) & torch.isfinite(g)
    same_inf = torch.isinf(e) & (g == e)
    diff = torch.where(finite, (g - e).abs(), torch.where(same_inf, 0.0, torch.inf))
    ok = (finite & (diff <= atol + rtol * e.abs())) | same_inf
    numel = expected.numel()
    max_abs = float(diff.max()) if numel else 0.0
    relative = torch.isfinite(e) & (e != 0)
    max_rel = float((diff[relative] / e[relative].abs()).max()) if bool(relative.any()) else 0.0
    mismatched = numel - int(ok.sum())
    if mismatched == 0:
        return None, max_abs, max_rel
    first = int(torch.argmax((~ok).flatten().to(torch.uint8)))
    index = [int(i) for i in torch.unravel_index(torch.tensor(first), expected.shape)]
    want, have = e.flatten()[first].item(), g.flatten()[first].item()
    detail = (f"has {mismatched} of {numel} values off by more than atol + rtol*|expected|; "
              f"the first, at {index}, is {have} where {want} is expected")
    fields = _mismatch("value", want, have, detail, index=index, max_abs_diff=max_abs,
                       mismatched=mismatched, numel=numel)
    return fields, max_abs, max_rel


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


def _identical(original: Any, after: Any) -> bool:
    if type(after) is not type(original):
        return False
    if not isinstance(original, torch.Tensor):
        return bool(after == original)
    if after.shape != original.shape or after.dtype != original.dtype:
        return False
    if original.is_floating_point() or original.is_complex():
        nan = original.isnan()
        if not torch.equal(nan, after.isnan()):
            return False
        return torch.equal(original.masked_fill(nan, 0), after.masked_fill(nan, 0))
    return torch.equal(original, after)


def find_modified_input(original: list[list], after: list[list]) -> dict | None:
    """The first input (set, index) whose value after the candidate's call differs at all."""
    for k, (before, now) in enumerate(zip(original, after)):
        for j, (value, value_after) in enumerate(zip(before, now)):
            if not _identical(value, value_after):
                return {"set": k, "input": j}
    return None


def load_candidate_outputs(path: str, input_sets: list[list]) -> tuple[list, list]:
    try:
        bundle = common.load_bundle(path)
    except Exception as error:
        raise common.Failure(f"the candidate's outputs {path} cannot be read: "
                             f"{type(error).__name__}: {error}", "candidate_output") from error
    outputs = bundle.get("outputs") if isinstance(bundle, dict) else None
    after = bundle.get("inputs_after") if isinstance(bundle, dict) else None
    n = len(input_sets)
    well_formed = (isinstance(outputs, list) and isinstance(after, list)
                   and len(outputs) == n and len(after) == n
                   and all(isinstance(o, list) for o in outputs)
                   and all(isinstance(a, list) and len(a) == len(i)
                           for a, i in zip(after, input_sets)))
    if not well_formed:
        raise common.Failure(f"the candidate's outputs {path} are not {n} sets of "
                             "{outputs, inputs_after}", "candidate_output")
    return outputs, after


def run_reference(task: ModuleType, init: dict, input_sets: list[list], init_seed: int,
                  device: str) -> list[list]:
    try:
        model, _ = common.build_model(task.Model, init, init_seed, device)
        results = []
        for inputs in input_sets:
            outputs = common.output_list(model(*common.to_device(inputs, device)))
            common.synchronize(device)
            results.append(common.to_cpu(outputs))
        return results
    except Exception as error:
        raise common.TaskError(f"the task's Model failed: {type(error).__name__}: {error}") \
            from error


def main(args: Any, report: dict) -> None:
    init = common.load_bundle(args.init)
    input_sets = common.load_bundle(args.inputs)
    outputs, inputs_after = load_candidate_outputs(args.candidate_out, input_sets)
    task = common.load_task(args.task)
    expected = run_reference(task, init, input_sets, args.init_seed, args.device)
    report.update(compare_sets(expected, outputs, args.atol, args.rtol, args.device))
    report["inputs_modified"] = find_modified_input(input_sets, inputs_after)
    report["correct"] = report["mismatch"] is None and report["inputs_modified"] is None


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
