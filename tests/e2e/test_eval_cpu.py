"""What a user of `cuda-agent eval` relies on, on the CPU device: a correct candidate is rewarded,
and every way a candidate can fail gives -1 with a reason a person can act on."""
import json
import shutil
import signal
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest
import torch

from conftest import EXAMPLE, verdict


def test_correct_candidate_is_rewarded_with_plausible_speedups(agent, task, candidate):
    code, r = agent.eval(task, candidate.path)
    assert code == 0, verdict(r)
    assert r["outcome"] == "pass" and r["compiled"] and r["correct"]
    assert r["violations"] == []
    assert r["reward"] >= 1
    # Times are physical: positive, and within a factor of 100 of each other for a fused
    # elementwise kernel against eager.
    for key in ("eager_us", "compile_us", "candidate_us"):
        assert r[key] > 0, key
    assert 0.01 < r["speedups"]["vs_eager"] < 100
    assert r["speedups"]["vs_eager"] == r["eager_us"] / r["candidate_us"]
    assert r["stages"]["verify"]["status"] == "ok"
    assert r["stages"]["profile"]["data"]["candidate"]["iters"] > 0
    assert r["id"] > 0


def test_second_evaluation_reuses_the_build_and_the_baselines(agent, task, candidate):
    agent.eval(task, candidate.path)
    code, r = agent.eval(task, candidate.path)
    assert code == 0, verdict(r)
    assert r["stages"]["compile"]["status"] == "cached"
    assert r["stages"]["profile"]["data"]["eager"]["cached"] is True
    assert r["stages"]["profile"]["data"]["compile"]["cached"] is True
    # torch's bytecode is kept in the build cache for the next evaluation's processes; the task's
    # copy, which lives only as long as its evaluation, leaves none there.
    kept = [p.as_posix() for p in (agent.cache / "bytecode").rglob("*.pyc")]
    assert any("/torch/nn/" in p for p in kept)
    assert any("/harness/common." in p for p in kept)
    assert not [p for p in kept if "/trusted/" in p]


def test_a_baseline_scope_times_its_own_baselines_once(agent, task, candidate):
    # bench --fresh-baselines: a run's baselines are timed beside its candidates, once, and
    # neither taken from the store's shared ones nor left in their place.
    agent.eval(task, candidate.path)  # the shared baselines exist
    scoped = []
    for _ in range(2):
        code, r = agent.eval(task, candidate.path, "--baseline-scope", "b-scope-test")
        assert code == 0, verdict(r)
        scoped.append(r["stages"]["profile"]["data"])
    assert scoped[0]["eager"]["cached"] is False and scoped[0]["compile"]["cached"] is False
    assert scoped[1]["eager"]["cached"] is True and scoped[1]["compile"]["cached"] is True
    assert scoped[1]["eager"]["settings"]["scope"] == "b-scope-test"
    code, shared = agent.eval(task, candidate.path)
    assert code == 0, shared
    assert shared["stages"]["profile"]["data"]["eager"]["cached"] is True
    assert "scope" not in shared["stages"]["profile"]["data"]["eager"]["settings"]


def test_shrink_runs_the_task_smaller_and_records_the_sizes(agent, task, candidate):
    code, r = agent.eval(task, candidate.path, "--shrink", "8")
    assert code == 0, verdict(r)
    assert r["settings"]["shrink"] == 8
    assert r["settings"]["task_sizes"] == {"rows": [512, 64]}
    code, full = agent.eval(task, candidate.path)
    assert code == 0, full
    # Baselines of the smaller run are its own, not the full size's.
    assert r["eager_us"] < full["eager_us"]
    assert "task_sizes" not in full["settings"]


def test_tf32_is_the_candidates_alone_and_the_result_records_it(agent, task, candidate):
    # A candidate that reads the precision it runs at, and fails unless it is TF32.
    call = "        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)\n"
    candidate.edit(candidate.model_new, call,
                   "        if torch.get_float32_matmul_precision() != \"high\":\n"
                   "            raise RuntimeError(\"TF32 was not pinned\")\n" + call)
    code, r = agent.eval(task, candidate.path, "--tf32")
    assert code == 0, verdict(r)
    assert r["settings"]["precision"] == "tf32" and r["reward"] >= 1
    shown = agent.run("show", str(r["id"]))
    assert "precision tf32" in shown.stdout, shown.stdout
    code, full = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 1 and full["settings"]["precision"] == "fp32"
    assert "TF32 was not pinned" in full["reason"], full["reason"]


def test_wrong_result_reports_the_first_mismatch(agent, task, candidate):
    # Forget the bias: every output where x * scale + bias > 0 differs.
    candidate.edit(candidate.kernel, "xr[c] * scale + bias[c]", "xr[c] * scale")
    code, r = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 1
    assert r["outcome"] == "mismatch" and r["reward"] == -1
    mismatch = r["stages"]["verify"]["data"]["check"]["mismatch"]
    assert mismatch["kind"] == "value"
    assert len(mismatch["index"]) == 2
    assert abs(mismatch["expected"] - mismatch["got"]) > 1e-2
    assert f"at {mismatch['index']}" in r["reason"]
    assert str(mismatch["expected"]) in r["reason"] and str(mismatch["got"]) in r["reason"]


def test_torch_compute_in_forward_is_a_violation(agent, task, candidate):
    candidate.edit(candidate.model_new, "        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)\n",
                   "        y = torch.relu(x * self.scale + self.bias)\n")
    code, r = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 1
    assert r["outcome"] == "violation" and r["reward"] == -1
    rules = {v["rule"] for v in r["violations"]}
    assert "torch_compute_op" in rules
    assert any("aten::mul" in v["detail"] for v in r["violations"]), r["violations"]


def test_compile_error_names_the_file_and_the_error(agent, task, candidate):
    candidate.edit(candidate.kernel, "yr[c] = v > 0.0f ? v : 0.0f;", "yr[c] = v > 0.0f ? v : zero;")
    code, r = agent.eval(task, candidate.path)
    assert code == 1
    assert r["outcome"] == "compile_error" and r["reward"] == -1 and not r["compiled"]
    assert "scale_bias_relu.cpp" in r["reason"] and "zero" in r["reason"]
    assert r["stages"]["compile"]["log"].startswith("first error:")
    assert r["stages"]["verify"]["status"] == "skipped"


def test_an_evaluation_interrupted_while_compiling_is_interrupted_not_a_compile_error(
        agent, task, candidate):
    # A bench stopped at its time limit interrupts the compiles under way: a compile error would
    # be counted against the candidate (and exported as a reward of -1).
    candidate.edit(candidate.kernel, "  return 0;\n}", "  return 0;\n}\n" + SLOW_TO_COMPILE)
    process = subprocess.Popen(
        [agent.binary, "--store", str(agent.store), "eval", "--device", "cpu", "--json",
         "--cache-dir", str(agent.cache), "--task", str(task),
         "--candidate", str(candidate.model_new), "--kernels", str(candidate.path / "kernels")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=agent.env)
    deadline = time.time() + 60
    while "cc1plus" not in descendants(process.pid) and time.time() < deadline:
        time.sleep(0.05)
    assert "cc1plus" in descendants(process.pid), "the compiler never started"
    process.send_signal(signal.SIGINT)  # while g++ evaluates the constant (seconds)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    r = json.loads(out)
    assert r["outcome"] == "interrupted" and r["stages"]["compile"]["status"] == "interrupted"


def descendants(pid: int) -> set[str]:
    """The command names of pid's descendant processes."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        name = stat_line[stat_line.index("(") + 1:stat_line.rindex(")")]
        parents[int(entry.name)] = (int(stat_line[stat_line.rindex(")") + 2:].split()[1]), name)
    names, frontier = set(), {pid}
    while frontier:
        children = {p for p, (ppid, _) in parents.items() if ppid in frontier}
        names |= {parents[p][1] for p in children}
        frontier = children
    return names


# Seconds of g++'s constant evaluation (loops of at most 2^18 iterations each, g++'s default).
SLOW_TO_COMPILE = """
constexpr long slow_constant() {
  long sum = 0;
  for (long i = 0; i < 100000; ++i)
    for (long j = 0; j < 20000; ++j) sum += (i ^ j) & 7;
  return sum;
}
static_assert(slow_constant() > 0, "");
"""


def test_segfault_is_a_crash_with_the_signal(agent, task, candidate):
    candidate.edit(candidate.kernel, "  return 0;\n}", "  *(volatile float*)nullptr = 1.0f;\n  return 0;\n}")
    code, r = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 1
    assert r["outcome"] == "crash" and r["reward"] == -1
    assert "signal 11" in r["reason"]


def test_hang_times_out_and_the_next_evaluation_passes(agent, task, candidate, tmp_path):
    candidate.edit(candidate.kernel, "  return 0;\n}", "  for (volatile int spin = 1; spin;) {}\n  return 0;\n}")
    code, r = agent.eval(task, candidate.path, "--stage", "verify", "--verify-timeout", "10")
    assert code == 1
    assert r["outcome"] == "timeout" and r["reward"] == -1
    assert "timed out after" in r["reason"]
    assert r["stages"]["verify"]["seconds"] < 60

    healthy = type(candidate)(tmp_path / "healthy")
    code, r = agent.eval(task, healthy.path, "--stage", "verify")
    assert code == 0, verdict(r)
    assert r["correct"]


SLOW_FREES = """
import sys
import time
import weakref
from pathlib import Path

_slow = None  # whether this process frees its outputs slowly: decided at its first call


def _slow_output(y):
    global _slow
    if _slow is None:
        budget = Path(BUDGET)  # how many timing processes are left to slow
        left = int(budget.read_text()) if budget.exists() else 0
        _slow = "timing.py" in sys.argv[0] and left > 0
        if _slow:
            budget.write_text(str(left - 1))
    if _slow:  # the harness's time between the timed calls grows, as on a busy machine
        weakref.finalize(y, time.sleep, 0.75)
    return y
"""


def test_time_around_the_timed_calls_is_timed_again_before_it_is_refused(agent, task, candidate,
                                                                          tmp_path):
    # The evaluator's clock around the candidate's timed calls can show time hidden from their
    # figures, or only a machine busier than when eager was timed: eager and the candidate are
    # timed again, back to back, and only that pair can refuse.
    budget = tmp_path / "slow_timings"
    slow_frees = SLOW_FREES.replace("BUDGET", repr(str(budget)))
    candidate.edit(candidate.model_new, "class ModelNew(", slow_frees + "\n\nclass ModelNew(")
    candidate.edit(candidate.model_new, "        return y", "        return _slow_output(y)")
    overhead_check = "host clock vs reported times (T5, T6)"

    budget.write_text("1")  # once: a busy moment
    code, r = agent.eval(task, candidate.path, "--source-rules", "warn")
    assert code == 0, verdict(r)
    statuses = [c["status"] for c in r["checks"] if c["name"] == overhead_check]
    assert statuses == ["retried", "passed"]
    data = r["stages"]["profile"]["data"]
    assert data["first_timing"]["host_overhead_s"] > 13  # 18 or more outputs freed, 0.75 s each
    assert data["eager_again"]["host_overhead_s"] > 0  # the yardstick, measured afresh
    assert r["candidate_us"] == data["candidate"]["median_us"]

    budget.write_text("2")  # every time: time the figures do not show
    code, r = agent.eval(task, candidate.path, "--source-rules", "warn")
    assert code == 1
    assert [v["rule"] for v in r["violations"]] == ["timing_inconsistent"]
    assert "timed just before" in r["reason"] and r["reward"] == -1
    statuses = [c["status"] for c in r["checks"] if c["name"] == overhead_check]
    assert statuses == ["retried", "failed"]


def test_modifying_an_input_is_a_violation(agent, task, candidate):
    candidate.edit(candidate.kernel, "const float* x,", "float* x,")
    candidate.edit(candidate.kernel, "const float* xr = x + r * cols;", "float* xr = x + r * cols;")
    candidate.edit(candidate.kernel, "yr[c] = v > 0.0f ? v : 0.0f;", "yr[c] = v > 0.0f ? v : 0.0f;\n      xr[c] = 0.0f;")
    code, r = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 1
    assert r["outcome"] == "violation"
    assert [v["rule"] for v in r["violations"]] == ["inputs_modified"]


def test_malformed_task_is_an_error_naming_the_file_and_what_is_missing(agent, candidate, tmp_path):
    broken = tmp_path / "broken_task.py"
    broken.write_text((EXAMPLE / "scale_bias_relu.py").read_text().replace("def get_inputs", "def make_inputs"))
    code, r = agent.eval(broken, candidate.path)
    assert code == 2
    assert str(broken) in r["_stderr"] and "get_inputs()" in r["_stderr"]


def test_task_that_fails_at_run_time_is_an_error_not_a_candidate_failure(agent, candidate, tmp_path):
    broken = tmp_path / "raises_task.py"
    broken.write_text((EXAMPLE / "scale_bias_relu.py").read_text().replace(
        "return [torch.randn(rows, features)]", "raise ValueError('no inputs today')"))
    code, r = agent.eval(broken, candidate.path, "--stage", "verify")
    assert code == 2
    assert "does not run" in r["_stderr"] and "no inputs today" in r["_stderr"]


def test_workspace_flow_and_tampered_infrastructure(agent, task, tmp_path):
    ws = tmp_path / "ws"
    init = agent.run("init", str(task), str(ws), "--device", "cpu")
    assert init.returncode == 0, init.stderr
    for f in ("SKILL.md", "model.py", "model_new.py", "utils/kernels.py", "utils/compile.py"):
        assert (ws / f).is_file(), f
    assert not (ws / "utils" / "kernels.py").stat().st_mode & stat.S_IWUSR

    # The untouched template is evaluated and fails with a reason, not a crash of the tool.
    result = agent.run("eval", str(ws), "--device", "cpu", "--stage", "compile", "--cache-dir", str(agent.cache))
    assert result.returncode == 1
    assert "no .cpp source" in result.stdout

    # Put the example candidate in, evaluate through the workspace's own entry point.
    (ws / "model_new.py").write_text((EXAMPLE / "model_new.py").read_text())
    (ws / "kernels" / "k.cpp").write_text((EXAMPLE / "kernels_cpu" / "scale_bias_relu.cpp").read_text())
    verify = subprocess.run(["python3", "utils/verify.py"], cwd=ws, capture_output=True, text=True,
                            timeout=600)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "PASS" in verify.stdout

    # Now tamper with the read-only binding: the evaluation is a violation before anything runs.
    binding = ws / "utils" / "kernels.py"
    binding.chmod(0o644)
    binding.write_text(binding.read_text() + "\n# harmless-looking change\n")
    result = agent.run("eval", str(ws), "--device", "cpu", "--json")
    assert result.returncode == 1
    r = json.loads(result.stdout)
    assert r["outcome"] == "violation" and r["reward"] == -1
    assert r["violations"][0]["rule"] == "infrastructure_modified"
    assert "utils/kernels.py" in r["reason"]


def test_explain_lists_every_check_with_what_it_saw(agent, task, candidate):
    result = agent.run("eval", "--device", "cpu", "--explain", "--cache-dir", str(agent.cache),
                       "--task", str(task), "--candidate", str(candidate.model_new),
                       "--kernels", str(candidate.path / "kernels"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "checks (" in out
    for name in ("source rules", "secret inputs", "sandbox", "candidate run (guard, watch)",
                 "task not degenerate (S4, S13)", "inputs unchanged (S3)",
                 "outputs vs reference", "timing report well-formed (T6)",
                 "time above physical floor (T9)", "timed outputs recomputed (T7, T8, T11)",
                 "workspace checksums after the run"):
        assert name in out, name
    assert "failed" not in out.split("checks (", 1)[1]
    assert "all 20 timed calls ran on fresh secret inputs" in out  # the cpu default


def test_show_prints_a_stored_evaluation(agent, task, candidate):
    code, r = agent.eval(task, candidate.path, "--stage", "verify")
    assert code == 0
    shown = agent.run("show", str(r["id"]))
    assert shown.returncode == 0
    assert "PASS  scale_bias_relu on cpu" in shown.stdout
    assert "outputs match on 7 input sets and a fresh rerun" in shown.stdout
    assert "passed   source rules" in shown.stdout
    # The scratch workspace of an --task/--candidate evaluation is not left in the store.
    with sqlite3.connect(agent.store) as db:
        assert db.execute("SELECT COUNT(*) FROM workspaces WHERE path = ?",
                          (r["workspace"],)).fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM evaluations WHERE id = ?",
                          (r["id"],)).fetchone() == (1,)


@pytest.fixture
def tampering_workspace(agent, task, tmp_path) -> Path:
    """A correct candidate whose model_new.py, when imported, rewrites the read-only reference."""
    ws = tmp_path / "ws"
    assert agent.run("init", str(task), str(ws), "--device", "cpu").returncode == 0
    (ws / "kernels" / "k.cpp").write_text((EXAMPLE / "kernels_cpu" / "scale_bias_relu.cpp").read_text())
    (ws / "model_new.py").write_text(
        "import os\n"
        "os.chmod('model.py', 0o644)\n"
        "with open('model.py', 'a') as f:\n"
        "    f.write('# easier next time\\n')\n" + (EXAMPLE / "model_new.py").read_text())
    return ws


def test_source_rules_stop_a_candidate_before_its_code_runs(agent, tampering_workspace):
    ws = tampering_workspace
    before = (ws / "model.py").read_text()
    result = agent.run("eval", str(ws), "--device", "cpu", "--stage", "verify", "--json",
                       "--cache-dir", str(agent.cache))
    assert result.returncode == 1, result.stderr
    r = json.loads(result.stdout)
    assert r["outcome"] == "violation" and r["reward"] == -1
    found = {(v["rule"], v["file"], v["line"]) for v in r["violations"]}
    assert ("forbidden_import", "model_new.py", 1) in found
    assert ("forbidden_call", "model_new.py", 3) in found
    assert r["reason"].startswith("model_new.py:1: ")
    assert (ws / "model.py").read_text() == before  # nothing of the candidate ran


def test_infrastructure_changed_by_the_candidate_during_evaluation_is_refused(
        agent, tampering_workspace):
    ws = tampering_workspace
    before = (ws / "model.py").read_text()
    result = agent.run("eval", str(ws), "--device", "cpu", "--stage", "verify", "--json",
                       "--source-rules", "warn", "--cache-dir", str(agent.cache))
    assert result.returncode == 1, result.stderr
    r = json.loads(result.stdout)
    assert r["reward"] == -1
    assert {w["rule"] for w in r["warnings"]} >= {"forbidden_import", "forbidden_call"}
    if r["sandbox"].get("readonly_enforced"):
        # model.py is a read-only mount in the candidate's process: the write itself fails.
        assert r["outcome"] == "runtime_error"
        assert "Read-only file system" in r["reason"]
        assert (ws / "model.py").read_text() == before
    else:  # no mount namespaces here: the checksums after the run catch the change
        assert r["outcome"] == "violation"
        assert r["violations"][0]["rule"] == "infrastructure_modified"
        assert "model.py" in r["reason"] and "during the evaluation" in r["reason"]


def test_cuda_device_without_a_gpu_is_a_clear_error_not_a_task_failure(agent, task, tmp_path):
    if torch.cuda.is_available() or shutil.which("nvcc") is None:
        pytest.skip("needs nvcc and no GPU")
    candidate = tmp_path / "cuda-candidate"
    candidate.mkdir()
    shutil.copy(EXAMPLE / "model_new.py", candidate / "model_new.py")
    shutil.copytree(EXAMPLE / "kernels_cuda", candidate / "kernels")
    result = agent.run("eval", "--device", "cuda", "--cache-dir",
                       str(agent.cache), "--task", str(task), "--candidate",
                       str(candidate / "model_new.py"), "--kernels", str(candidate / "kernels"))
    assert result.returncode == 2
    assert "cannot run on --device cuda" in result.stderr
    assert "no CUDA device" in result.stderr
    assert "does not run" not in result.stderr
