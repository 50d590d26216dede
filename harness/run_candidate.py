"""Runs the candidate's ModelNew on the verify input sets and writes its outputs (untrusted
process: it never sees reference outputs; check.py compares what it wrote)."""

import faulthandler

faulthandler.enable()

import os
import sys
from typing import Any

import common


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--workspace", required=True, help="folder holding model_new.py")
    parser.add_argument("--kernel-lib", required=True, help="the compiled kernel library")
    parser.add_argument("--init", required=True, help="init.pt from prepare.py")
    parser.add_argument("--inputs", required=True, help="verify_inputs.pt from prepare.py")
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="where candidate_out.pt is written")
    return parser


def main(args: Any, report: dict) -> None:
    report.update(violations=[], library_ops=[], weights=None, output_types=[])
    out_path = os.path.abspath(args.out)  # the candidate's loader changes the cwd
    init = common.load_bundle(args.init)
    input_sets = common.load_bundle(args.inputs)
    model, guard = common.load_candidate_model(args.workspace, args.kernel_lib, init,
                                               args.init_seed, args.device, report)
    outputs, inputs_after = [], []
    for inputs in input_sets:
        if args.device == "cuda":
            common.poison_cuda_allocator()
        device_inputs = common.to_device(inputs, args.device)
        result = common.call_candidate(model, device_inputs, guard, args.device)
        report["output_types"] = [common.type_name(value) for value in result]
        common.check_output_types(result)
        outputs.append(common.to_cpu(result))
        inputs_after.append(common.to_cpu(device_inputs))
        del result, device_inputs
    common.save_bundle({"outputs": outputs, "inputs_after": inputs_after}, out_path)


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
