"""Draws a task's weights and input sets from secret seeds and checks that the task runs
(trusted). Writes OUT/init.pt, OUT/verify_inputs.pt and OUT/profile_inputs.pt."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import os
import random
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


def draw_inputs(task: ModuleType, seed: int, count: int, device: str) -> list[list]:
    """count sets from get_inputs(), set k under torch.manual_seed(seed + k), as host tensors.
    The task's tensor factories run on the device (torch.randn of a gigabyte takes milliseconds
    there and seconds on the host); the sets go to the host one at a time."""
    sets = []
    for k in range(count):
        torch.manual_seed(seed + k)
        with torch.device(device):
            sets.append(common.to_cpu(list(task.get_inputs())))
    return sets


def draw_all(task: ModuleType, args: Any, report: dict) -> tuple[list[list], list[list]]:
    """The verify and profile sets, drawn on the device; on the host instead when get_inputs()
    cannot run on the device (it builds a host generator of its own, say), and the report's
    inputs_drawn_on says which."""
    def both(device: str) -> tuple[list[list], list[list]]:
        return (draw_inputs(task, args.seed, args.verify_sets, device),
                draw_inputs(task, args.seed + PROFILE_SEED_OFFSET, args.profile_sets, device))

    report["inputs_drawn_on"] = args.device
    if args.device != "cpu":
        try:
            return both(args.device)
        except Exception as error:
            report["inputs_drawn_on"] = "cpu"
            report["inputs_device_error"] = f"{type(error).__name__}: {error}"
    return both("cpu")


def floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def shifted(inputs: list, rng: random.Random) -> list:
    """S5: the floating inputs moved to another scale and centre, so an answer that is the
    expected value of get_inputs()'s distribution (or any constant tuned to it) no longer holds."""
    scale, shift = 1.5 + 1.5 * rng.random(), 2 * rng.random() - 1
    return [v * scale + shift if floating(v) else v for v in inputs]


def spiked(inputs: list, rng: random.Random) -> list:
    """S6: one element of each floating input far above the rest, so a reduction over a
    subsample, or a kernel that skips part of its input, misses it."""
    result = []
    for value in inputs:
        if floating(value) and value.numel() > 1:
            value = value.clone(memory_format=torch.contiguous_format)
            flat = value.view(-1)
            spread = float(value.abs().max()) if value.numel() else 0.0
            flat[rng.randrange(flat.numel())] += 50 * (spread + 1)
        result.append(value)
    return result


def extra_sets(task_model: torch.nn.Module, base: list, seed: int, device: str,
               report: dict) -> list[list]:
    """The shifted and spiked verify sets, made on the device from set 0 (base, there already)
    and kept, on the host, only where the reference gives finite outputs on them (a task may
    need positive inputs, or probabilities: then the set is dropped, and the report says so)."""
    rng = random.Random(seed)
    kept, dropped = [], []
    for name, make in (("shifted", shifted), ("spiked", spiked)):
        candidate = make(base, rng)
        try:
            outputs = common.output_list(task_model(*common.to_device(candidate, device)))
            common.synchronize(device)
            finite = all(bool(torch.isfinite(o).all()) for o in outputs
                         if isinstance(o, torch.Tensor) and (o.is_floating_point()
                                                              or o.is_complex()))
        except Exception as error:
            dropped.append({"set": name, "reason": f"the reference raised "
                            f"{type(error).__name__}: {error}"})
            continue
        if not finite:
            dropped.append({"set": name, "reason": "the reference's outputs are not finite"})
            continue
        kept.append(common.to_cpu(candidate))
    report["extra_sets"] = {"kept": len(kept), "dropped": dropped}
    return kept


def peak_bandwidth(device: str) -> float | None:
    """Bytes per second the device's memory can move at most (cuda), for the time floor."""
    if device != "cuda":
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz, bus_bits = getattr(props, "memory_clock_rate", 0), getattr(props,
                                                                         "memory_bus_width", 0)
    if not clock_khz or not bus_bits:
        return None
    return clock_khz * 1e3 * 2 * bus_bits / 8  # double data rate


def main(args: Any, report: dict) -> None:
    if args.verify_sets < 1 or args.profile_sets < 1:
        raise common.UsageError("--verify-sets and --profile-sets must be at least 1")
    task = common.load_task(args.task)
    report["sizes"] = common.shrink_task(task, args.shrink)
    try:
        with common.step(report, "model"):
            torch.manual_seed(args.init_seed)
            init_inputs = list(task.get_init_inputs())
            model = task.Model(*init_inputs)
        with common.step(report, "draw_inputs"):
            verify, profile = draw_all(task, args, report)
    except Exception as error:
        raise common.TaskError(f"building the task's model or inputs failed: "
                               f"{type(error).__name__}: {error}") from error

    os.makedirs(args.out, exist_ok=True)
    state = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    with common.step(report, "write"):
        common.save_bundle({"init_inputs": common.to_cpu(init_inputs), "state_dict": state},
                           os.path.join(args.out, "init.pt"))
        common.save_bundle(profile, os.path.join(args.out, "profile_inputs.pt"))

    try:
        with common.step(report, "reference"):
            model = model.to(args.device)
            base = common.to_device(verify[0], args.device)  # moved once, copied on the device
            outputs = common.output_list(model(*common.to_device(base, args.device)))
            common.synchronize(args.device)
    except Exception as error:
        raise common.TaskError(f"the task's Model failed on verify set 0: "
                               f"{type(error).__name__}: {error}") from error
    with common.step(report, "extra_sets"):
        verify += extra_sets(model, base, args.seed ^ 0x5EED, args.device, report)
    with common.step(report, "write"):
        common.save_bundle(verify, os.path.join(args.out, "verify_inputs.pt"))

    report["torch"] = torch.__version__
    report["device_name"] = common.device_name(args.device)
    report["inputs"] = [common.describe(value) for value in verify[0]]
    report["outputs"] = [common.describe(value) for value in outputs]
    report["parameters"] = sum(p.numel() for p in model.parameters())
    report["verify_sets"] = len(verify)
    report["output_bytes"] = common.tensor_bytes(outputs)
    report["peak_bandwidth"] = peak_bandwidth(args.device)


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
