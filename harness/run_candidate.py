"""Runs the candidate's ModelNew on the verify input sets and writes its outputs (untrusted
process: it never sees reference outputs; check.py compares what it wrote). The sets are drawn
here, one at a time, from prepare.py's recipe (input_sets.py)."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import os
import sys
from typing import Any

import torch

import common
import input_sets
from watch import CallObserver


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--workspace", required=True, help="folder holding model_new.py")
    parser.add_argument("--kernel-lib", required=True, help="the compiled kernel library")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--task", required=True,
                        help="the task file, whose get_inputs() draws the input sets")
    parser.add_argument("--inputs", required=True, help="inputs.json from prepare.py")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="where candidate_out.pt is written")
    common.add_precision_argument(parser)
    return parser


# The rerun's poison: large finite values (about 1.3e7 in float32), where the first runs saw NaN.
RERUN_POISON = 0x4B


def run_set(model: torch.nn.Module, guard: Any, watch: Any, sets: input_sets.InputSets, k: int,
            device: str, poison: int, report: dict, spill: common.Spill,
            observer: Any = None) -> tuple[list, list]:
    """One verification call: poisoned allocator, verify set k drawn afresh, the guarded call
    (under the profiler when an observer is given), the checks; the outputs (and any input the
    call changed) written out at once (spill)."""
    if device == "cuda":
        with common.step(report, "poison"):
            common.poison_cuda_allocator(poison)
    with common.step(report, "inputs"):
        device_inputs = sets.verify(k)
    with common.step(report, "calls"):
        if observer is None:
            result = common.call_candidate(model, device_inputs, guard, device)
        else:
            with observer:
                result = common.call_candidate(model, device_inputs, guard, device)
    watch.returned()
    report["output_types"] = [common.type_name(value) for value in result]
    with common.step(report, "checks"):
        common.check_output_types(result)
        common.after_call(guard, watch, (device_inputs, result))
    with common.step(report, "inputs_after"):
        # Each input after the call, for check.py to compare with the original (drawn again):
        # None where it is unchanged, so that a full-size task's verification holds no second
        # copy of a set.
        original = sets.verify(k)
        after = [None if common.identical(before, value) else spill.one(value)
                 for before, value in zip(original, device_inputs)]
        del original
    with common.step(report, "outputs"):
        return spill(result), after


def main(args: Any, report: dict) -> None:
    report.update(violations=[], library_ops=[], weights=None, output_types=[])
    out_path = os.path.abspath(args.out)  # the candidate's loader changes the cwd
    init = common.load_bundle(args.init)
    # The task before the candidate: its get_inputs() draws the sets (its Model is the
    # workspace's model.py, which the candidate may read anyway).
    task = common.load_task(args.task)
    common.shrink_task(task, args.shrink)
    sets = input_sets.InputSets(args.inputs, task, args.device, candidate_process=True)
    with common.step(report, "load"):
        CallObserver.start_profiler(args.device)
        model, guard, watch = common.load_candidate_model(args.workspace, args.kernel_lib, init,
                                                          args.init_seed, args.device, report)
    spill = common.Spill(out_path)
    outputs, inputs_after = [], []
    for k in range(sets.verify_count):
        result, after = run_set(model, guard, watch, sets, k, args.device, 0xFF, report, spill)
        outputs.append(result)
        inputs_after.append(after)
    # S12, S14: set 0 once more, on a ModelNew built afresh, over memory poisoned differently.
    # check.py compares it with the reference like any set: output that depended on stale
    # memory or on state from earlier calls does not survive this. B1, B2: this call runs under
    # the profiler, which sees torch compute the guard was kept from seeing, and foreign kernels.
    fresh, _ = common.build_model(type(model), init, args.init_seed, args.device)
    observer = CallObserver(args.device, args.kernel_lib, guard.violations)
    rerun, _ = run_set(fresh, guard, watch, sets, 0, args.device, RERUN_POISON, report, spill,
                       observer)
    with common.step(report, "write"):
        common.save_bundle({"outputs": outputs, "inputs_after": inputs_after, "rerun": rerun},
                           out_path)


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
