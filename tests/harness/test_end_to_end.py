"""The harness scripts run as the evaluator runs them: child processes, files and JSON reports."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import common
import input_sets
from conftest import HARNESS, build_library

SEED, INIT_SEED, SCALE = 1234, 77, 2.0

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return [2.0]
"""

KERNEL = r"""
#include <cstdint>
extern "C" int scale_relu(const float* x, float* y, int64_t n, float scale, void* stream) {
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.f ? x[i] : 0.f) * scale;
  return 0;
}
"""

# Forgets the relu on the second half.
WRONG_KERNEL = KERNEL.replace("x[i] > 0.f", "(x[i] > 0.f || i >= n / 2)")

MODEL_NEW = """
import torch
import torch.nn as nn
from utils.kernels import load

scale_relu = load().bind("scale_relu", "tensor", "tensor", "i64", "f32", "stream")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.empty_like(x)
        scale_relu(x, y, x.numel(), self.scale)
        return y
"""


def run(script: str, *args: object) -> dict:
    """Runs a harness script as the evaluator does and returns its report."""
    report = Path(args[args.index("--report") + 1])
    # As the evaluator starts them: OpenMP threads sleep when idle (watch.py's thread check).
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    result = subprocess.run([sys.executable, "-E", "-s", str(HARNESS / script), *map(str, args)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A task, its prepared bundles, and the right and the wrong kernel library."""
    root = tmp_path_factory.mktemp("e2e")
    (root / "task.py").write_text(TASK)
    build_library(root, "right", KERNEL)
    build_library(root, "wrong", WRONG_KERNEL)
    report = run("prepare.py", "--task", root / "task.py", "--device", "cpu", "--seed", SEED,
                 "--init-seed", INIT_SEED, "--verify-sets", 3, "--profile-sets", 2,
                 "--out", root, "--report", root / "prepare.json")
    assert report["ok"], report
    return root


def workspace(root: Path, name: str, model_new: str = MODEL_NEW) -> Path:
    folder = root / name
    folder.mkdir()
    shutil.copytree(HARNESS / "workspace" / "utils", folder / "utils")
    (folder / "model_new.py").write_text(model_new)
    shutil.copy(root / "task.py", folder / "model.py")
    return folder


def run_candidate(root: Path, name: str, model_new: str = MODEL_NEW, lib: str = "right") -> dict:
    return run("run_candidate.py", "--workspace", workspace(root, name, model_new),
               "--kernel-lib", root / f"lib{lib}.so", "--task", root / "task.py",
               "--init", root / "init.pt", "--inputs", root / "inputs.json",
               "--init-seed", INIT_SEED,
               "--device", "cpu", "--out", root / f"{name}.pt", "--report", root / f"{name}.json")


def check(root: Path, name: str) -> dict:
    return run("check.py", "--task", root / "task.py", "--init", root / "init.pt",
               "--inputs", root / "inputs.json", "--candidate-out", root / f"{name}.pt",
               "--init-seed", INIT_SEED, "--device", "cpu", "--report", root / f"check_{name}.json")


def profile(root: Path, impl: str, warmup: int, iters: int) -> dict:
    return run("timing.py", "--impl", impl, "--task", root / "task.py",
               "--workspace", workspace(root, f"profile_{impl}"),
               "--kernel-lib", root / "libright.so",
               "--init", root / "init.pt", "--inputs", root / "inputs.json",
               "--init-seed", INIT_SEED, "--device", "cpu", "--warmup", warmup, "--iters", iters,
               "--flush-mb", 1, "--out", root / f"timed_{impl}.pt",
               "--report", root / f"profile_{impl}.json")


def drawn(root: Path, task: str = "task.py") -> "input_sets.InputSets":
    """The input sets of prepare.py's recipe, as another process of the evaluation draws them."""
    module = common.load_task(str(root / task))
    return input_sets.InputSets(str(root / "inputs.json"), module, "cpu")


def test_prepare_writes_a_recipe_and_describes_the_task(prepared: Path) -> None:
    report = json.loads((prepared / "prepare.json").read_text())
    assert report["inputs"] == [{"shape": [256, 1024], "dtype": "float32"}]
    assert report["outputs"] == [{"shape": [256, 1024], "dtype": "float32"}]
    assert report["parameters"] == 0
    assert report["torch"] == torch.__version__ and report["device_name"]
    assert report["inputs_repeatable"] is True and report["inputs_drawn_on"] == "cpu"
    init = torch.load(prepared / "init.pt", weights_only=True)
    assert init == {"init_inputs": [SCALE], "state_dict": {}}
    # No set is written: each process draws them from the recipe.
    assert not list(prepared.glob("*_inputs.pt"))
    sets = drawn(prepared)
    # The 3 seeded sets, then a shifted and a spiked copy of set 0 (relu is finite on both).
    assert report["extra_sets"] == {"kept": 2, "dropped": []}
    assert sets.recipe["extra_sets"] == ["shifted", "spiked"]
    assert sets.verify_count == report["verify_sets"] == 5 and sets.profile_count == 2
    verify = list(sets.verify_sets())
    assert not torch.allclose(verify[3][0], verify[0][0])
    spike = (verify[4][0] - verify[0][0]).abs()
    assert int((spike > 0).sum()) == 1 and float(spike.max()) > 50
    assert report["output_bytes"] == 256 * 1024 * 4 and report["peak_bandwidth"] is None
    for k, inputs in enumerate(verify[:3]):
        torch.manual_seed(SEED + k)
        assert torch.equal(inputs[0], torch.randn(256, 1024))
    torch.manual_seed(SEED + 1000 + 1)
    expected = torch.randn(256, 1024)
    assert torch.equal(sets.profile(1)[0], expected)


def test_a_correct_kernel_passes(prepared: Path) -> None:
    report = run_candidate(prepared, "right")
    phases = report.pop("phases")
    assert report == {"ok": True, "violations": [], "library_ops": [], "weights": "loaded",
                      "output_types": ["torch.Tensor"], "precision": "fp32"}
    assert phases["startup_s"] > 0 and phases["work_s"] > 0
    result = check(prepared, "right")
    assert result["ok"] and result["correct"], result
    assert result["sets"] == 5 and result["mismatch"] is None and result["degenerate"] is None
    assert result["inputs_modified"] is None
    assert result["max_abs_diff"] == 0.0


def test_candidate_code_runs_with_the_garbage_collector_on(prepared: Path) -> None:
    # The harness loads its modules with the collector off; a candidate whose objects form cycles
    # must still have them collected. This one zeroes its output where the collector is off.
    collected = MODEL_NEW.replace("import torch\n", "import gc\nimport torch\n", 1).replace(
        "        return y\n", "        return y if gc.isenabled() else y * 0\n")
    assert run_candidate(prepared, "collected", collected)["ok"]
    result = check(prepared, "collected")
    assert result["correct"] and result["max_abs_diff"] == 0.0, result


def test_importing_harness_modules_leaves_the_importers_collector_on() -> None:
    # Benchmarks and tests import check.py and common.py as a library; only a harness script run
    # as the program loads its modules with the collector off.
    code = (f"import sys; sys.path.insert(0, {str(HARNESS)!r}); import check, gc; "
            "print(gc.isenabled())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0 and result.stdout.split() == ["True"], result.stderr


def test_a_wrong_kernel_is_a_mismatch(prepared: Path) -> None:
    assert run_candidate(prepared, "wrong", lib="wrong")["ok"]
    result = check(prepared, "wrong")
    assert result["ok"] and result["correct"] is False
    x = drawn(prepared).verify(0)[0].flatten()
    half = x.numel() // 2
    off = x[half:] < -0.005  # 2|x| > atol + rtol * 0
    first = half + int(torch.nonzero(off)[0])
    mismatch = result["mismatch"]
    assert (mismatch["set"], mismatch["output"], mismatch["kind"]) == (0, 0, "value")
    assert mismatch["index"] == [first // 1024, first % 1024]
    assert mismatch["expected"] == 0.0
    assert mismatch["got"] == pytest.approx(x[first].item() * SCALE)
    assert mismatch["mismatched"] == int(off.sum())


# get_inputs() that counts its calls: no two draws alike, so prepare.py writes the sets out.
COUNTING_TASK = TASK.replace(
    "def get_inputs():\n    return [torch.randn(256, 1024)]",
    "CALLS = [0]\n\n\ndef get_inputs():\n    CALLS[0] += 1\n"
    "    return [torch.randn(256, 1024) + CALLS[0]]")

# get_inputs() that depends on the process: alike twice in prepare.py, different anywhere else.
PER_PROCESS_TASK = TASK.replace("import torch\n", "import os\nimport torch\n", 1).replace(
    "return [torch.randn(256, 1024)]", "return [torch.randn(256, 1024) + os.getpid()]")


def prepare_task(root: Path, source: str) -> dict:
    (root / "task.py").write_text(source)
    build_library(root, "right", KERNEL)
    return run("prepare.py", "--task", root / "task.py", "--device", "cpu", "--seed", SEED,
               "--init-seed", INIT_SEED, "--verify-sets", 2, "--profile-sets", 2,
               "--out", root, "--report", root / "prepare.json")


def test_a_task_whose_draws_differ_has_its_sets_written(tmp_path: Path) -> None:
    assert COUNTING_TASK != TASK
    report = prepare_task(tmp_path, COUNTING_TASK)
    assert report["ok"] and report["inputs_repeatable"] is False, report
    recipe = json.loads((tmp_path / "inputs.json").read_text())
    assert recipe["bundles"] == {kind: str(tmp_path / f"{kind}_inputs.pt")
                                 for kind in ("verify", "profile")}
    written = torch.load(tmp_path / "verify_inputs.pt", weights_only=True)
    assert len(written) == report["verify_sets"] == 4
    assert torch.equal(drawn(tmp_path).verify(1)[0], written[1][0])
    assert run_candidate(tmp_path, "right")["ok"]
    result = check(tmp_path, "right")
    assert result["correct"] and result["max_abs_diff"] == 0.0, result
    assert_timings(profile(tmp_path, "candidate", warmup=1, iters=2), "candidate", 2)


def test_a_set_another_process_draws_differently_is_refused(tmp_path: Path) -> None:
    assert PER_PROCESS_TASK != TASK
    report = prepare_task(tmp_path, PER_PROCESS_TASK)
    assert report["ok"] and report["inputs_repeatable"] is True, report
    candidate = run_candidate(tmp_path, "right")
    assert candidate["ok"] is False and candidate["error_kind"] == "inputs", candidate
    assert "verify set 0 drawn in this process differs" in candidate["error"]
    eager = profile(tmp_path, "eager", warmup=1, iters=2)
    assert eager["ok"] is False and eager["error_kind"] == "task", eager
    assert "profile set 0 drawn in this process differs" in eager["error"]


def test_a_kernel_that_writes_its_input_is_caught(prepared: Path) -> None:
    in_place = MODEL_NEW.replace("y = torch.empty_like(x)", "y = x")
    assert run_candidate(prepared, "in_place", in_place)["ok"]
    result = check(prepared, "in_place")
    assert result["mismatch"] is None
    assert result["inputs_modified"] == {"set": 0, "input": 0}
    assert result["correct"] is False


@pytest.mark.parametrize("name, forward", [
    ("torch_relu", "return torch.relu(x) * self.scale"),
    ("fallback", "try:\n            return torch.relu(x) * self.scale\n"
                 "        except Exception:\n            y = torch.empty_like(x)\n"
                 "            scale_relu(x, y, x.numel(), self.scale)\n            return y"),
], ids=["torch_relu", "fallback"])
def test_torch_compute_in_forward_is_a_violation(prepared: Path, name: str, forward: str) -> None:
    body = MODEL_NEW[MODEL_NEW.index("        y = torch.empty_like"):]
    report = run_candidate(prepared, name, MODEL_NEW.replace(body, f"        {forward}\n"))
    assert report["ok"] is False and report["error_kind"] == "violation"
    assert report["violations"] == [{"rule": "torch_compute_op",
                                     "detail": "aten::relu called during ModelNew.forward"}]
    assert not (prepared / f"{name}.pt").exists()


def test_subclassing_the_task_model_is_a_violation(prepared: Path) -> None:
    inherits = "from model import Model\n\n\nclass ModelNew(Model):\n    pass\n"
    report = run_candidate(prepared, "inherits", inherits)
    assert report["ok"] is False and report["error_kind"] == "violation"
    assert [v["rule"] for v in report["violations"]] == ["inherits_model"]


def test_an_output_that_is_not_a_tensor_is_refused(prepared: Path) -> None:
    as_dict = MODEL_NEW.replace("        return y\n", "        return {'y': y}\n")
    report = run_candidate(prepared, "as_dict", as_dict)
    assert report["ok"] is False and report["error_kind"] == "output"
    assert report["output_types"] == ["dict"]


def test_model_new_that_fails_to_import_is_a_load_error(prepared: Path) -> None:
    report = run_candidate(prepared, "broken", "import no_such_module\n")
    assert report["ok"] is False and report["error_kind"] == "load"
    assert "no_such_module" in report["error"] and "no_such_module" in report["traceback"]


def test_check_without_candidate_outputs(prepared: Path) -> None:
    report = check(prepared, "never_written")
    assert report["ok"] is False and report["error_kind"] == "candidate_output"


def test_a_task_missing_get_inputs(tmp_path: Path) -> None:
    task = tmp_path / "no_inputs.py"
    task.write_text(TASK[:TASK.index("def get_inputs")] + TASK[TASK.index("def get_init_inputs"):])
    report = run("prepare.py", "--task", task, "--device", "cpu", "--seed", 1, "--init-seed", 2,
                 "--out", tmp_path, "--report", tmp_path / "report.json")
    assert report["ok"] is False and report["error_kind"] == "task"
    assert str(task) in report["error"] and "get_inputs" in report["error"]
    assert "get_init_inputs" not in report["error"].replace(str(task), "")


def test_bad_arguments_still_write_a_report(tmp_path: Path) -> None:
    report = run("check.py", "--device", "cpu", "--report", tmp_path / "report.json")
    assert report["ok"] is False and report["error_kind"] == "usage"
    assert "--task" in report["error"]


def assert_timings(report: dict, impl: str, iters: int) -> None:
    assert report["ok"], report
    assert report["impl"] == impl and report["iters"] == iters
    times = report["times_us"]
    assert len(times) == iters and all(t > 0 for t in times)
    assert report["min_us"] == min(times) and report["max_us"] == max(times)
    assert report["min_us"] <= report["p10_us"] <= report["median_us"] <= report["p90_us"] \
        <= report["max_us"]


@pytest.mark.parametrize("impl", ["eager", "candidate"])
def test_profile(prepared: Path, impl: str) -> None:
    report = profile(prepared, impl, warmup=2, iters=5)
    assert_timings(report, impl, 5)
    if impl == "candidate":
        assert report["violations"] == [] and report["weights"] == "loaded"


# A candidate that fails unless the evaluator pinned TF32 for it: it reads the setting (which
# a candidate may) and never sets it (which it may not).
NEEDS_TF32 = MODEL_NEW.replace(
    "        y = torch.empty_like(x)\n",
    "        if torch.get_float32_matmul_precision() != \"high\":\n"
    "            raise RuntimeError(\"TF32 was not pinned\")\n"
    "        y = torch.empty_like(x)\n")


def test_the_candidate_runs_in_the_precision_the_evaluator_pins(prepared: Path) -> None:
    tf32 = run("run_candidate.py", "--workspace", workspace(prepared, "tf32", NEEDS_TF32),
               "--kernel-lib", prepared / "libright.so", "--task", prepared / "task.py",
               "--init", prepared / "init.pt", "--inputs", prepared / "inputs.json",
               "--init-seed", INIT_SEED,
               "--device", "cpu", "--out", prepared / "tf32.pt", "--precision", "tf32",
               "--report", prepared / "tf32.json")
    assert tf32["ok"] and tf32["violations"] == [] and tf32["precision"] == "tf32", tf32
    full = run_candidate(prepared, "full_fp32", NEEDS_TF32)
    assert not full["ok"] and "TF32 was not pinned" in full["error"]
    assert full["precision"] == "fp32"
    timed = run("timing.py", "--impl", "candidate", "--task", prepared / "task.py",
                "--workspace", workspace(prepared, "timed_tf32", NEEDS_TF32),
                "--kernel-lib", prepared / "libright.so", "--init", prepared / "init.pt",
                "--inputs", prepared / "inputs.json", "--init-seed", INIT_SEED,
                "--device", "cpu", "--warmup", 1, "--iters", 2, "--flush-mb", 1,
                "--out", prepared / "timed_tf32.pt", "--precision", "tf32",
                "--report", prepared / "timed_tf32.json")
    assert timed["ok"] and timed["violations"] == [], timed


def test_the_baselines_are_never_timed_in_tf32(prepared: Path) -> None:
    report = run("timing.py", "--impl", "eager", "--task", prepared / "task.py",
                 "--init", prepared / "init.pt", "--inputs", prepared / "inputs.json",
                 "--init-seed", INIT_SEED, "--device", "cpu", "--warmup", 1, "--iters", 2,
                 "--out", prepared / "timed_eager_tf32.pt", "--precision", "tf32",
                 "--report", prepared / "eager_tf32.json")
    assert not report["ok"] and report["error_kind"] == "usage"
    assert "the candidate's alone" in report["error"]


@pytest.mark.slow
def test_profile_compile(prepared: Path) -> None:
    report = profile(prepared, "compile", warmup=1, iters=2)
    assert_timings(report, "compile", 2)
    # dynamo and inductor are imported before the process's release, off the device's time.
    assert report["phases"]["before_release_s"] > 0


PICKED_ISA = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
import torch
from torch._inductor import cpu_vec_isa
pythons = []
check_call = subprocess.check_call
def recorded(argv, *args, **kwargs):
    if argv[0] == sys.executable:
        pythons.append(argv)
    return check_call(argv, *args, **kwargs)
subprocess.check_call = recorded
if sys.argv[2] == "harness":
    import common
    compiled = common.torch_compile(lambda x: torch.relu(x) * 2 + 1, "cpu")
    x = torch.randn(64, 64)
    assert torch.equal(compiled(x), torch.relu(x) * 2 + 1)
isa = cpu_vec_isa.pick_vec_isa()
print(len(pythons), str(isa), isa.build_arch_flags())
"""


@pytest.mark.slow
def test_a_cpu_compile_takes_the_vector_instruction_sets_inductor_would_probe_for() -> None:
    # Inductor probes each vector instruction set by loading a test library in a Python of its
    # own (seconds each); the harness takes the CPU's flags instead, and must pick the same sets.
    def picked(how: str) -> list[str]:
        result = subprocess.run([sys.executable, "-c", PICKED_ISA, str(HARNESS), how],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        return result.stdout.split(maxsplit=1)

    probes, harness_isa = picked("harness")
    assert probes == "0", "the harness's torch.compile started a Python to probe an ISA"
    torch_probes, torch_isa = picked("inductor")
    assert harness_isa == torch_isa
    if torch_isa.strip():  # a CPU with a vector ISA: inductor did probe for it
        assert int(torch_probes) > 0


GATED = """
import os, sys
sys.path.insert(0, sys.argv.pop(1))
import common

def while_waiting(args):
    # Runs after the start-up is announced, and before the release: the test opens the gate
    # only once this file exists.
    common.write_text_atomic(args.wait_for + ".warm",
                             str(os.path.exists(args.wait_for + ".waiting")))

def main(args, report):
    with open(args.wait_for) as f:
        report["released"] = f.read()

sys.exit(common.run_script(common.make_parser("gated"), main, None, while_waiting))
"""


def test_work_while_waiting_comes_after_the_start_up_is_announced_and_before_the_release(
        tmp_path: Path) -> None:
    # The evaluator waits for every step's GATE.waiting, holding the device, before candidate
    # code runs: what a step does after announcing it (torch.compile's warm-up on cuda) is off
    # that wait, and still done before the step's own work.
    script, gate, report = tmp_path / "gated.py", tmp_path / "gate", tmp_path / "report.json"
    script.write_text(GATED)
    process = subprocess.Popen([sys.executable, str(script), str(HARNESS), "--device", "cpu",
                                "--wait-for", str(gate), "--report", str(report)])
    try:
        warm = Path(f"{gate}.warm")
        deadline = time.monotonic() + 120
        while not warm.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert warm.read_text() == "True"  # GATE.waiting was there when while_waiting ran
        assert not report.exists()  # and the step waits for its release after it
        common.write_text_atomic(str(gate), "go")
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()
    result = json.loads(report.read_text())
    assert result["ok"] and result["released"] == "go", result
    assert result["phases"]["while_waiting_s"] >= 0 and "waited_s" in result["phases"]
