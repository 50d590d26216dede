"""Draws a task's weights and input sets from secret seeds and checks that the task runs
(trusted). Writes OUT/init.pt and OUT/inputs.json, the recipe every other process draws the
input sets from again (input_sets.py); where get_inputs() does not repeat itself, the sets too,
as OUT/verify_inputs.pt and OUT/profile_inputs.pt."""

import faulthandler

faulthandler.enable()

import startup  # noqa: F401  (first: no garbage collection while modules load)

import os
import sys
from types import ModuleType
from typing import Any

import torch

import common
import input_sets


def make_parser():
    parser = common.make_parser(__doc__)
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--seed", type=int, required=True,
                        help="input seed S: verify set k uses S+k, profile set k S+1000+k, "
                             "the shifted and spiked sets S xor 0x5EED")
    parser.add_argument("--init-seed", type=int, required=True, help="seed for Model's weights")
    parser.add_argument("--verify-sets", type=int, default=5,
                        help="input sets for check.py (default %(default)s)")
    parser.add_argument("--profile-sets", type=int, default=4,
                        help="input sets for timing.py (default %(default)s)")
    parser.add_argument("--out", required=True, help="folder for init.pt and the recipe")
    return parser


def draw_set(task: ModuleType, seed: int, device: str, report: dict) -> tuple[list, str]:
    """One set on the device; on the host instead when get_inputs() cannot run on the device (it
    builds a host generator of its own, say). Returns the set and where it was drawn."""
    if device != "cpu":
        try:
            return input_sets.draw(task, seed, device), device
        except Exception as error:
            report["inputs_device_error"] = f"{type(error).__name__}: {error}"
    return input_sets.draw(task, seed, "cpu"), "cpu"


def draw_all(task: ModuleType, args: Any, report: dict) -> tuple[list, dict, list[list] | None]:
    """Set 0, on the device, and the recipe's seeds and fingerprints of every seeded set. Set 0
    is drawn twice: where the two differ, get_inputs() is not a function of its seed, and every
    set goes to the host to be written as a bundle (the third value; None otherwise). So do the
    sets of a task drawn on the host for a device run: drawing them again in every process
    would take seconds each time, where reading them takes a fraction of one."""
    seeds = {"verify": args.seed, "profile": args.seed + input_sets.PROFILE_SEED_OFFSET,
             "extra": args.seed ^ input_sets.EXTRA_SEED_MIX}
    base, drawn_on = draw_set(task, args.seed, args.device, report)
    again = input_sets.draw(task, args.seed, drawn_on)
    repeatable = len(base) == len(again) and all(map(common.identical, base, again))
    del again
    report["inputs_drawn_on"] = drawn_on
    report["inputs_repeatable"] = repeatable
    recipe = {"seeds": seeds, "drawn_on": drawn_on, "extra_sets": [],
              "fingerprints": {"verify": [], "profile": []}, "bundles": None}
    written = not repeatable or drawn_on != args.device
    host: dict[str, list] = {"verify": [], "profile": []}
    for kind, count in (("verify", args.verify_sets), ("profile", args.profile_sets)):
        for k in range(count):
            values = base if kind == "verify" and k == 0 else \
                input_sets.draw(task, seeds[kind] + k, drawn_on)
            recipe["fingerprints"][kind].append(input_sets.fingerprint(values))
            if written:
                host[kind].append(common.to_cpu(values))
    return common.to_device(base, args.device), recipe, host if written else None


def extra_sets(task_model: torch.nn.Module, base: list, recipe: dict, device: str,
               report: dict) -> list[list]:
    """The shifted and spiked verify sets, made on the device from set 0 (base, there already)
    and kept only where the reference gives finite outputs on them (a task may need positive
    inputs, or probabilities: then the set is dropped, and the report says so). Their names go
    into the recipe; the kept sets are returned."""
    kept, dropped = [], []
    for name, candidate in input_sets.extra_sets(base, recipe["seeds"]["extra"]):
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
        kept.append(candidate)
        recipe["extra_sets"].append(name)
        recipe["fingerprints"]["verify"].append(input_sets.fingerprint(candidate))
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
            base, recipe, host = draw_all(task, args, report)
    except Exception as error:
        raise common.TaskError(f"building the task's model or inputs failed: "
                               f"{type(error).__name__}: {error}") from error

    os.makedirs(args.out, exist_ok=True)
    state = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    with common.step(report, "write"):
        common.save_bundle({"init_inputs": common.to_cpu(init_inputs), "state_dict": state},
                           os.path.join(args.out, "init.pt"))

    try:
        with common.step(report, "reference"):
            model = model.to(args.device)
            outputs = common.output_list(model(*common.to_device(base, args.device)))
            common.synchronize(args.device)
    except Exception as error:
        raise common.TaskError(f"the task's Model failed on verify set 0: "
                               f"{type(error).__name__}: {error}") from error
    with common.step(report, "extra_sets"):
        kept = extra_sets(model, base, recipe, args.device, report)
    with common.step(report, "write"):
        if host is not None:
            host["verify"] += [common.to_cpu(values) for values in kept]
            # Absolute, so that a copy of the recipe in another folder still finds them.
            recipe["bundles"] = {kind: os.path.abspath(os.path.join(args.out, f"{kind}_inputs.pt"))
                                 for kind in host}
            for kind, sets in host.items():
                common.save_bundle(sets, recipe["bundles"][kind])
        input_sets.write_recipe(os.path.join(args.out, input_sets.RECIPE), recipe)

    report["torch"] = torch.__version__
    report["device_name"] = common.device_name(args.device)
    report["inputs"] = [common.describe(value) for value in base]
    report["outputs"] = [common.describe(value) for value in outputs]
    report["parameters"] = sum(p.numel() for p in model.parameters())
    report["verify_sets"] = len(recipe["fingerprints"]["verify"])
    report["output_bytes"] = common.tensor_bytes(outputs)
    report["peak_bandwidth"] = peak_bandwidth(args.device)


if __name__ == "__main__":
    sys.exit(common.run_script(make_parser(), main))
