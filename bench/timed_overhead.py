"""What timing.py and check.py --timed do around each timed call of a full-size task, per call,
before and after their passes over memory were cut: the fresh scaled inputs (TimedPlan.inputs),
the fingerprint of the outputs (TimedPlan.fingerprint) and the recheck's comparison of it
(check.compare_fingerprints), each beside the float64 form it replaced (reproduced here as it
was); and how far the float32 sums the fingerprints now take stand from float64 ones, against
check.FINGERPRINT_SLACK.

    python3 bench/timed_overhead.py [--gib 2] [--device cuda]   # prints a table, writes timed_overhead.json
"""
import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness"))
import check  # noqa: E402
import common as harness  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_common", HERE / "common.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

ATOL = RTOL = 1e-2


def inputs_before(plan: harness.TimedPlan, base: list, i: int) -> list:
    """TimedPlan.inputs as it was: a clone, then the factors drawn and shaped in place."""
    scale, result = plan.scales[i], []
    for k, value in enumerate(base):
        value = value.clone()
        generator = torch.Generator(device=value.device)
        generator.manual_seed(k)
        factors = torch.rand(value.shape, generator=generator, device=value.device)
        value.mul_(factors.mul_(-2 * plan.JITTER).add_(1).mul_(scale))
        result.append(value)
    return result


def fingerprint_before(weights: torch.Tensor, output: torch.Tensor) -> list:
    """TimedPlan.fingerprint as it was: the output widened to float64, then summed."""
    wide = output.to(torch.float64)
    pair = torch.stack([wide.sum(), (wide * weights).sum()])
    return pair.tolist()


def compare_before(weights: torch.Tensor, expected: torch.Tensor) -> list:
    """check.compare_fingerprints's sums and limits as they were, in float64."""
    wide = expected.to(torch.float64)
    assert bool(torch.isfinite(wide).all())
    bound = ATOL + RTOL * wide.abs()
    sums = torch.stack([wide.sum(), (wide * weights).sum()]).tolist()
    limits = torch.stack([bound.sum(), (bound * weights.abs()).sum()]).tolist()
    return sums + limits + [float(wide.abs().sum())]


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def per_call_ms(repeats: int, fn) -> float:
    """Median milliseconds of fn over repeats calls, the device synchronized around each."""
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0, help="input and output size (float32)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a small check run")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("timed_overhead.py needs a CUDA device (or --device cpu)")
    torch.set_grad_enabled(False)
    n = int(args.gib * (1 << 30)) // 4
    x = torch.randn(n, device=args.device)  # never zeros
    output = torch.nn.functional.leaky_relu(x, 0.2)
    plan = harness.TimedPlan(12345, 100, 1, 2)
    call = SimpleNamespace(atol=ATOL, rtol=RTOL)
    fingerprint = plan.fingerprint([output])
    weights64 = plan.weights(0, output).to(torch.float64)
    rows = [
        ("fresh scaled inputs", per_call_ms(args.repeats, lambda: inputs_before(plan, [x], 3)),
         per_call_ms(args.repeats, lambda: plan.inputs([[x]], 3))),
        ("fingerprint of the outputs",
         per_call_ms(args.repeats, lambda: fingerprint_before(weights64, output)),
         per_call_ms(args.repeats, lambda: plan.fingerprint([output]))),
        ("recheck: sums and limits of the reference",
         per_call_ms(args.repeats, lambda: compare_before(weights64, output)),
         per_call_ms(args.repeats,
                     lambda: check.compare_fingerprints(0, plan, [output], fingerprint, call))),
    ]
    bench.print_table(["per timed call, %.1f GiB float32" % args.gib, "before ms", "after ms",
                       "ratio"], [[label, f"{b:.2f}", f"{a:.2f}", f"{b / a:.2f}x"]
                                  for label, b, a in rows])

    # Rounding of the float32 sums against float64 ones, relative to the sum of magnitudes (what
    # check.FINGERPRINT_SLACK is relative to), on three kinds of output.
    accuracy = []
    for label, values in (("randn", x), ("leaky_relu(randn)", output),
                          ("randn + 3 (one sign)", x + 3)):
        exact = fingerprint_before(weights64, values)
        got = plan.fingerprint([values])[0][:2]
        magnitude = float(values.to(torch.float64).abs().sum())
        errors = [abs(g - e) / (magnitude + 1.0) for g, e in zip(got, exact)]
        accuracy.append((label, errors))
    bench.print_table(["output", "sum: |f32 - f64| / sum|x|", "weighted", "FINGERPRINT_SLACK"],
                      [[label, f"{e[0]:.2e}", f"{e[1]:.2e}", f"{check.FINGERPRINT_SLACK:.0e}"]
                       for label, e in accuracy])
    path = bench.write_json("timed_overhead.json", {
        "device_name": harness.device_name(args.device), "torch": torch.__version__, "gib": args.gib,
        "per_call_ms": {label: {"before": b, "after": a} for label, b, a in rows},
        "relative_error": {label: {"sum": e[0], "weighted": e[1]} for label, e in accuracy},
        "slack": check.FINGERPRINT_SLACK})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
