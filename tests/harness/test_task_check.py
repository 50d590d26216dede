"""task_check.py's parts that the end-to-end filter tests cannot reach on a CPU: a task that runs
out of GPU memory beside other processes' tasks is measured again with the GPU to itself, and
the size scaling every harness script shares."""
import types
from types import SimpleNamespace

import pytest
import torch

import common
import task_check


def args(**overrides):
    base = dict(shrink=1, device="cpu", gpu_lock=None)
    return SimpleNamespace(**{**base, **overrides})


def test_out_of_memory_beside_others_is_measured_again_alone(monkeypatch, tmp_path):
    locks = []

    def measure(path, a, result, lock):
        locks.append(lock)
        if lock is not None:  # sharing the GPU
            try:
                raise torch.OutOfMemoryError("CUDA out of memory")
            except torch.OutOfMemoryError as error:
                raise task_check.StageError("eager", error) from error
        result["eager_ms"] = 1.0

    monkeypatch.setattr(task_check, "measure", measure)
    lock = str(tmp_path / "gpu.lock")
    result = task_check.check_one("t.py", "k", args(gpu_lock=lock))
    assert locks == [lock, None]  # the second time inside the lock, held throughout
    assert result["ok"] and result["measured_alone"] and result["eager_ms"] == 1.0
    assert "out_of_memory" not in result


def test_out_of_memory_alone_is_the_tasks_own(monkeypatch, tmp_path):
    def measure(path, a, result, lock):
        try:
            raise torch.OutOfMemoryError("CUDA out of memory")
        except torch.OutOfMemoryError as error:
            raise task_check.StageError("eager", error) from error

    monkeypatch.setattr(task_check, "measure", measure)
    result = task_check.check_one("t.py", "k", args(gpu_lock=str(tmp_path / "gpu.lock")))
    assert not result["ok"] and result["stage"] == "eager" and result["measured_alone"]
    assert "out of memory" in result["error"]


def test_other_failures_are_not_measured_again(monkeypatch):
    calls = []

    def measure(path, a, result, lock):
        calls.append(lock)
        raise task_check.StageError("compile", RuntimeError("no backend"))

    monkeypatch.setattr(task_check, "measure", measure)
    result = task_check.check_one("t.py", "k", args(gpu_lock="/tmp/unused.lock"))
    assert len(calls) == 1 and result["stage"] == "compile"


def module(**constants):
    task = types.ModuleType("task")
    for name, value in constants.items():
        setattr(task, name, value)
    return task


def test_shrink_divides_the_named_sizes_and_says_so():
    task = module(rows=4096, features=100, SCALABLE_SIZES=("rows", "features"))
    assert common.shrink_task(task, 64) == {"rows": [4096, 64], "features": [100, 1]}
    assert task.rows == 64 and task.features == 1


def test_shrink_refuses_what_is_not_an_integer_constant():
    with pytest.raises(common.TaskError, match="not a module-level integer"):
        common.shrink_task(module(rows=4.5, SCALABLE_SIZES=("rows",)), 2)
    with pytest.raises(common.TaskError, match="must be a tuple"):
        common.shrink_task(module(rows=8, SCALABLE_SIZES="rows"), 2)
    with pytest.raises(common.UsageError):
        common.shrink_task(module(), 0)
    assert common.shrink_task(module(rows=8), 4) == {}  # names none: nothing to scale


def test_matches_decides_on_the_whole_output_not_only_its_sample():
    torch.manual_seed(0)
    expected = torch.randn(300, 1001)
    assert task_check.matches([expected], [expected.clone()], 1e-2, 1e-2)
    # One value off, at an index the evenly spread sample skips: still a mismatch.
    picked = set(torch.linspace(0, expected.numel() - 1, task_check.SAMPLE).long().tolist())
    hidden = next(i for i in range(expected.numel()) if i not in picked)
    got = expected.clone()
    got.view(-1)[hidden] += 1.0
    assert not task_check.matches([expected], [got], 1e-2, 1e-2)
    # NaN never matches, wherever it is; different lengths and dtypes never match.
    got = expected.clone()
    got.view(-1)[hidden] = float("nan")
    assert not task_check.matches([expected], [got], 1e-2, 1e-2)
    assert not task_check.matches([expected], [expected, expected], 1e-2, 1e-2)
    assert not task_check.matches([expected], [expected.double()], 1e-2, 1e-2)
    # A non-contiguous output is sampled through its own layout.
    assert task_check.matches([expected.t()], [expected.t().contiguous()], 1e-2, 1e-2)
    assert not task_check.matches([expected.t()], [torch.zeros(1001, 300)], 1e-2, 1e-2)
