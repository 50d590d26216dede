"""Draws a task's weights and input sets from secret seeds and checks that the task runs
(trusted). Writes OUT/init.pt, OUT/verify_inputs.pt and OUT/profile_inputs.pt."""

import faulthandler

faulthandler.enable()

import os
import sys
from types import ModuleType
from typing import Any

import torch

import common

PROFILE_SEED_OFFSET = 1000


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--seed", type=int, required=True,
                        help="input seed S: verify set k uses S+k, profile set k S+1000+k")
    parser.add_argument("--init-seed", type=int, required=True, help="seed for Model's weights")
    parser.add_argument("--verify-sets", type=int, default=5,
                        help="input sets for check.py (default %(default)s)")
    parser.add_argument("--profile-sets", type=int, default=4,
                        help="input sets for timing.py (default %(default)s)")
    parser.add_argument("--out", required=True, help="folder for the bundles")
    return parser


def draw_inputs(task: ModuleType, seed: int, count: int) -> list[list]:
    sets = []
    for k in range(count):
        torch.manual_seed(seed + k)
        sets.append(common.to_cpu(list(task.get_inputs())))
    return sets


def main(args: Any, report: dict) -> None:
    if args.verify_sets < 1 or args.profile_sets < 1:
        raise common.UsageError("--verify-sets and --profile-sets must be at least 1")
    task = common.load_task(args.task)
    try:
        torch.manual_seed(args.init_seed)
        init_inputs = list(task.get_init_inputs())
        model = task.Model(*init_inputs)
        verify = draw_inputs(task, args.seed, args.verify_sets)
        profile = draw_inputs(task, args.seed + PROFILE_SEED_OFFSET, args.profile_sets)
    except Exception as error:
        raise common.TaskError(f"building the task's model or inputs failed: "
                               f"{type(error).__name__}: {error}") from error

    os.makedirs(args.out, exist_ok=True)
    state = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    common.save_bundle({"init_inputs": common.to_cpu(init_inputs), "state_dict": state},
                       os.path.join(args.out, "init.pt"))
    common.save_bundle(verify, os.path.join(args.out, "verify_inputs.pt"))
    common.save_bundle(profile, os.path.join(args.out, "profile_inputs.pt"))

    try:
        model = model.to(args.device)
        outputs = common.output_list(model(*common.to_device(verify[0], args.device)))
        common.synchronize(args.device)
    except Exception as error:
        raise common.TaskError(f"the task's Model failed on verify set 0: "
                               f"{type(error).__name__}: {error}") from error

    report["torch"] = torch.__version__
    report["device_name"] = common.device_name(args.device)
    report["inputs"] = [common.describe(value) for value in verify[0]]
    report["outputs"] = [common.describe(value) for value in outputs]
    report["parameters"] = sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
