"""Runs the candidate's ModelNew on the verify input sets and writes its outputs (untrusted
process: it never sees reference outputs; check.py compares what it wrote)."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import os
import sys
from typing import Any

import torch

import common
from watch import CallObserver


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--workspace", required=True, help="folder holding model_new.py")
    parser.add_argument("--kernel-lib", required=True, help="the compiled kernel library")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True, help="verify_inputs.pt from prepare.py")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="where candidate_out.pt is written")
    common.add_precision_argument(parser)
    return parser


# The rerun's poison: large finite values (about 1.3e7 in float32), where the first runs saw NaN.
RERUN_POISON = 0x4B


def run_set(model: torch.nn.Module, guard: Any, watch: Any, inputs: list, device: str,
            poison: int, report: dict, observer: Any = None) -> tuple[list, list]:
    """One verification call: poisoned allocator, fresh inputs, the guarded call (under the
    profiler when an observer is given), the checks."""
    if device == "cuda":
        with common.step(report, "poison"):
            common.poison_cuda_allocator(poison)
    with common.step(report, "inputs"):
        device_inputs = common.to_device(inputs, device)
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
        # Each input after the call, for check.py to compare with the original: None where it
        # is unchanged, so that a full-size task's verification holds no second copy of a set.
        after = [None if common.identical(original, value) else common.host_copy(value)
                 for original, value in zip(inputs, device_inputs)]
    with common.step(report, "outputs"):
        return common.to_cpu(result), after


def main(args: Any, report: dict) -> None:
    report.update(violations=[], library_ops=[], weights=None, output_types=[])
    out_path = os.path.abspath(args.out)  # the candidate's loader changes the cwd
    init = common.load_bundle(args.init)
    input_sets = common.load_bundle(args.inputs)
    with common.step(report, "load"):
        CallObserver.start_profiler(args.device)
        model, guard, watch = common.load_candidate_model(args.workspace, args.kernel_lib, init,
                                                          args.init_seed, args.device, report)
    outputs, inputs_after = [], []
    for inputs in input_sets:
        result, after = run_set(model, guard, watch, inputs, args.device, 0xFF, report)
        outputs.append(result)
        inputs_after.append(after)
    # S12, S14: set 0 once more, on a ModelNew built afresh, over memory poisoned differently.
    # check.py compares it with the reference like any set: output that depended on stale
    # memory or on state from earlier calls does not survive this. B1, B2: this call runs under
    # the profiler, which sees torch compute the guard was kept from seeing, and foreign kernels.
    fresh, _ = common.build_model(type(model), init, args.init_seed, args.device)
    observer = CallObserver(args.device, args.kernel_lib, guard.violations)
    rerun, _ = run_set(fresh, guard, watch, input_sets[0], args.device, RERUN_POISON, report,
                       observer)
    with common.step(report, "write"):
        common.save_bundle({"outputs": outputs, "inputs_after": inputs_after, "rerun": rerun},
                           out_path)


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
