"""rules.py: the static rules over a candidate's sources, called in-process and as a script.

Every rule has a case that must fire (at the line marked HERE, with the rule's severity) and
near misses that must not; an honest workspace yields no findings at all.
"""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rules

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "harness" / "rules.py"
EXAMPLE = ROOT / "examples" / "scale_bias_relu"
TEMPLATE_UTILS = ROOT / "harness" / "workspace" / "utils"
V, W = "violation", "warning"

HONEST_MODEL_NEW = """\
import torch
import torch.nn as nn

from utils.kernels import load

lib = load()
scale_bias_relu = lib.bind("scale_bias_relu", "tensor", "tensor", "tensor", "i64", "i64", "f32",
                           "stream")

class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.scale = scale
    def forward(self, x):
        y = torch.empty_like(x)
        scale_bias_relu(x, self.bias, y, x.shape[0], x.shape[1], self.scale)
        return y
"""


def make_workspace(folder: Path, model_new: str | None = HONEST_MODEL_NEW,
                   files: dict[str, str] | None = None) -> Path:
    """A workspace as the evaluator gives it (utils/ and the task's model.py, which both import
    things candidates may not), with model_new.py and the given files."""
    shutil.copytree(TEMPLATE_UTILS, folder / "utils")
    shutil.copy(EXAMPLE / "scale_bias_relu.py", folder / "model.py")
    (folder / "kernels").mkdir()
    if model_new is not None:
        (folder / "model_new.py").write_text(model_new)
    for name, text in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def marked_line(source: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if "HERE" in line)


def python_findings(folder: Path, source: str) -> list[dict]:
    report = rules.check_workspace(make_workspace(folder, textwrap.dedent(source)))
    assert report["parse_error"] is None
    return report["findings"]


def native_findings(folder: Path, source: str, name: str = "kernels/k.cu") -> list[dict]:
    report = rules.check_workspace(make_workspace(folder, files={name: textwrap.dedent(source)}))
    return report["findings"]


def assert_fires(found: list[dict], rule: str, severity: str, file: str, line: int) -> None:
    hits = [f for f in found if f["rule"] == rule and f["line"] == line]
    assert hits, f"{rule} did not fire at line {line}: {found}"
    assert hits[0]["severity"] == severity and hits[0]["file"] == file
    assert hits[0]["detail"].startswith(f"line {line} ")


# --- honest workspaces -----------------------------------------------------------------------


@pytest.mark.parametrize("model_new", [HONEST_MODEL_NEW, (EXAMPLE / "model_new.py").read_text()],
                         ids=["brief", "example"])
def test_honest_workspace_has_no_findings(tmp_path: Path, model_new: str) -> None:
    workspace = make_workspace(tmp_path, model_new, {
        "kernels/scale_bias_relu.cpp": (EXAMPLE / "kernels_cpu/scale_bias_relu.cpp").read_text(),
        "kernels/scale_bias_relu.cu": (EXAMPLE / "kernels_cuda/scale_bias_relu.cu").read_text(),
    })
    report = rules.check_workspace(workspace)
    assert report == {"ok": True, "findings": [], "parse_error": None, "files": [
        "kernels/scale_bias_relu.cpp", "kernels/scale_bias_relu.cu", "model_new.py"]}


def test_workspace_template_has_no_findings(tmp_path: Path) -> None:
    template = (ROOT / "harness" / "workspace" / "model_new.py").read_text()
    workspace = make_workspace(tmp_path, template)
    assert rules.check_workspace(workspace)["findings"] == []


# --- Python rules ----------------------------------------------------------------------------

PYTHON_FIRES = {
    "import ctypes": ("forbidden_import", V, "import torch\nimport ctypes  # HERE\n"),
    "import os.path": ("forbidden_import", V, "import os.path  # HERE\n"),
    "from sys import modules": ("forbidden_import", V, "from sys import modules  # HERE\n"),
    "import torch._dynamo": ("forbidden_import", V, "import torch._dynamo  # HERE\n"),
    "from torch import _C": ("forbidden_import", V, "from torch import _C  # HERE\n"),
    "from torch.utils import _python_dispatch": (
        "forbidden_import", V, "from torch.utils import _python_dispatch  # HERE\n"),
    "from torch.utils.cpp_extension import load_inline": (
        "forbidden_import", V, "from torch.utils.cpp_extension import load_inline  # HERE\n"),
    "from model import Model": ("forbidden_import", V, "from model import Model  # HERE\n"),
    "import guard": ("forbidden_import", V, "import guard  # HERE\n"),
    "exec()": ("forbidden_call", V, "def f():\n    exec('x = 1')  # HERE\n"),
    "eval by reference": ("forbidden_call", V, "run = eval  # HERE\n"),
    "open()": ("forbidden_call", V, "data = open('/tmp/x').read()  # HERE\n"),
    "__import__()": ("forbidden_call", V, "m = __import__('o' + 's')  # HERE\n"),
    "setattr()": ("forbidden_call", V, "import torch\nsetattr(torch, 'relu', abs)  # HERE\n"),
    "getattr with a computed name": (
        "forbidden_call", V, "import torch\nname = '_' + 'C'\ngetattr(torch, name)  # HERE\n"),
    "attrgetter with a computed name": (
        "forbidden_call", V, "from operator import attrgetter\nattrgetter(n)  # HERE\n"),
    "torch._C": ("forbidden_attribute", V, "import torch\ntorch._C._get_tracing_state()  # HERE\n"),
    "x.__class__": ("forbidden_attribute", V, "def f(x):\n    return x.__class__  # HERE\n"),
    "__builtins__": ("forbidden_attribute", V, "b = __builtins__  # HERE\n"),
    "getattr for _C": ("forbidden_attribute", V, "import torch\ngetattr(torch, '_C')  # HERE\n"),
    "torch.compile": ("forbidden_attribute", V, "import torch\nf = torch.compile(abs)  # HERE\n"),
    "self.compile()": ("forbidden_attribute", V,
                       "class M:\n    def __init__(self):\n        self.compile()  # HERE\n"),
    "torch.cuda.graph": ("forbidden_attribute", V,
                         "import torch\nwith torch.cuda.graph(g):  # HERE\n    pass\n"),
    "CUDAGraph": ("forbidden_attribute", V, "import torch\ng = torch.cuda.CUDAGraph()  # HERE\n"),
    "from torch.cuda import graph": ("forbidden_attribute", V,
                                     "from torch.cuda import graph  # HERE\n"),
    "make_graphed_callables": ("forbidden_attribute", V,
                               "import torch\ng = torch.cuda.make_graphed_callables(f)  # HERE"),
    "torch.ops": ("forbidden_attribute", V, "import torch\nop = torch.ops.aten.add  # HERE\n"),
    "the profiler's recording ended": (
        "forbidden_attribute", V,
        "import torch\ntorch.autograd._disable_profiler_legacy()  # HERE\n"),
    "torch.autograd.profiler": (
        "forbidden_attribute", V, "import torch\np = torch.autograd.profiler.profile()  # HERE\n"),
    "import torch.profiler": ("forbidden_import", V, "import torch.profiler  # HERE\n"),
    "torch.backends": ("forbidden_attribute", V,
                       "import torch\nok = torch.backends.cudnn.is_available()  # HERE\n"),
    "torch.relu = ...": ("monkey_patch", V, "import torch\ntorch.relu = abs  # HERE\n"),
    "F.relu = ... in a function": ("monkey_patch", V, """\
        import torch.nn.functional as F
        def patch():
            F.relu = abs  # HERE
        """),
    "lib attribute": ("monkey_patch", V,
                      "from utils.kernels import load\nlib = load()\nlib.bind = print  # HERE\n"),
    "class attribute outside its class": ("monkey_patch", V, """\
        class ModelNew:
            pass
        ModelNew.forward = print  # HERE
        """),
    "module imported in a function": ("monkey_patch", V, """\
        def patch():
            import torch
            torch.relu = abs  # HERE
        """),
    "augmented": ("monkey_patch", V, "import math\nmath.pi += 1  # HERE\n"),
    "annotated": ("monkey_patch", V, "import torch\ntorch.Tensor.add: object = abs  # HERE\n"),
    "del": ("monkey_patch", V, "import torch\ndel torch.relu  # HERE\n"),
    "__dict__ item": ("monkey_patch", V, "import torch\ntorch.__dict__['relu'] = abs  # HERE\n"),
    "through a local alias": ("monkey_patch", V, """\
        import torch
        def patch():
            t = torch
            t.relu = abs  # HERE
        """),
    "allow_tf32": ("precision_changed", V,
                   "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True  # HERE\n"),
    "set_float32_matmul_precision": (
        "precision_changed", V, "import torch\ntorch.set_float32_matmul_precision('high')  # HERE"),
    "autocast": ("precision_changed", V,
                 "import torch\ndef f(x):\n    with torch.autocast('cuda'):  # HERE\n        pass"),
    "from torch import autocast": ("precision_changed", V, "from torch import autocast  # HERE\n"),
    "try/except": ("fallback", W, """\
        import torch
        class ModelNew:
            def forward(self, x):
                try:  # HERE
                    return self.kernel(x)
                except RuntimeError:
                    return torch.relu(x)
        """),
    "global": ("module_state", W, "CACHE = None\ndef f(x):\n    global CACHE  # HERE\n"),
    "nonlocal": ("module_state", W,
                 "def f():\n    n = 0\n    def g():\n        nonlocal n  # HERE\n"),
    "module-level dict item": ("module_state", W,
                               "CACHE = {}\ndef f(x):\n    CACHE[x.data_ptr()] = x  # HERE\n"),
    "functools.cache": ("module_state", W,
                        "import functools\n@functools.cache  # HERE\ndef f(n):\n    return n\n"),
    "import scipy": ("unknown_import", W, "import scipy  # HERE\n"),
    "from torch.cuda import Stream": ("unknown_import", W,
                                      "from torch.cuda import Stream  # HERE\n"),
}


@pytest.mark.parametrize("rule, severity, source", PYTHON_FIRES.values(), ids=PYTHON_FIRES.keys())
def test_python_rule_fires(tmp_path: Path, rule: str, severity: str, source: str) -> None:
    source = textwrap.dedent(source)
    assert_fires(python_findings(tmp_path, source), rule, severity, "model_new.py",
                 marked_line(source))


PYTHON_NEAR_MISSES = {
    "words in comments and strings": '''\
        """Mentions exec, torch._C, allow_tf32 and ctypes in a docstring."""
        import torch
        # import ctypes; exec(x); torch.relu = abs; torch.backends.cudnn.allow_tf32 = True
        NOTE = "open(), eval(), torch.compile, global state, import os"
        ''',
    "self and local attributes": """\
        import torch
        class ModelNew(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = None
                self.scale = 2.0
            def forward(self, x):
                y = torch.empty_like(x)
                y.tag = "out"
                out = {}
                out["y"] = y
                del out["y"]
                return y
        """,
    "allowed imports and aliases": """\
        from __future__ import annotations
        import math
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn import init
        from typing import Optional
        from utils.kernels import load
        def f(x, w):
            return F.linear(x, w) if math.isfinite(1.0) else None
        """,
    "parameters named like builtins": """\
        class ModelNew:
            def forward(self, input, vars=None):
                return input
        """,
    "getattr with a literal name": """\
        class ModelNew:
            def forward(self, x):
                return getattr(self, "bias", None)
        """,
    "allowed dunders": """\
        class ModelNew:
            def __init__(self):
                super().__init__()
                self.name = type(self).__name__
        __all__ = ["ModelNew"]
        if __name__ == "__main__":
            pass
        """,
    "re.compile": "from re import compile as c\npattern = c('x')\n",
    "relative import": "from . import helpers\n",
    "try/finally without a handler": "def f(x):\n    try:\n        return x\n    finally:\n"
                                     "        pass\n",
}


@pytest.mark.parametrize("source", PYTHON_NEAR_MISSES.values(), ids=PYTHON_NEAR_MISSES.keys())
def test_python_near_miss_does_not_fire(tmp_path: Path, source: str) -> None:
    found = python_findings(tmp_path, source)
    assert [f for f in found if f["rule"] != "unknown_import"] == []
    if "import re" not in source and "from re" not in source:
        assert found == []


def test_own_modules_are_checked_and_importable_but_utils_and_model_are_not(
        tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "import helpers\nfrom pkg.inner import f\n", {
        "helpers.py": "import ctypes\n",
        "pkg/__init__.py": "",
        "pkg/inner.py": "import torch\ndef f():\n    torch.relu = abs\n",
    })
    report = rules.check_workspace(workspace)
    assert [(f["file"], f["line"], f["rule"]) for f in report["findings"]] == [
        ("helpers.py", 1, "forbidden_import"), ("pkg/inner.py", 3, "monkey_patch")]
    assert "utils/kernels.py" not in report["files"] and "model.py" not in report["files"]


# --- native rules ----------------------------------------------------------------------------

NATIVE_FIRES = {
    "dlopen": ("native_loader", V, 'void* h = dlopen("libtorch.so", 1);  // HERE\n'),
    "dlsym": ("native_loader", V, 'auto f = dlsym(h, "x");  // HERE\n'),
    "#include <torch/extension.h>": ("torch_from_native", V,
                                     "#include <torch/extension.h>  // HERE\n"),
    '#include "ATen/ATen.h"': ("torch_from_native", V, '#include "ATen/ATen.h"  // HERE\n'),
    "#include <Python.h>": ("torch_from_native", V, "#include <Python.h>  // HERE\n"),
    "at::": ("torch_from_native", V, "void f(at::Tensor t);  // HERE\n"),
    "Python C API": ("torch_from_native", V, "void f() { PyObject_CallObject(g, 0); }  // HERE\n"),
    "mprotect": ("native_patch", V, "mprotect(page, 4096, 7);  // HERE\n"),
    "/proc/self/mem": ("native_patch", V, 'int fd = ::open("/proc/self/mem", 2);  // HERE\n'),
    "LD_PRELOAD": ("native_patch", V, 'const char* p = getenv("LD_PRELOAD");  // HERE\n'),
    "setenv": ("native_patch", V, 'setenv("CUDA_LAUNCH_BLOCKING", "1", 1);  // HERE\n'),
    "system()": ("process_spawn", V, 'void f() { std::system("nvidia-smi"); }  // HERE\n'),
    "fork()": ("process_spawn", V, "if (fork() == 0) {}  // HERE\n"),
    "execve": ("process_spawn", V, "execve(path, argv, envp);  // HERE\n"),
    "cudaGraphLaunch": ("cuda_graph", V, "cudaGraphLaunch(exec, stream);  // HERE\n"),
    "cudaStreamBeginCapture": ("cuda_graph", V,
                               "cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal); // HERE\n"),
    "accessPolicyWindow": ("l2_persistence", V,
                           "attr.accessPolicyWindow.base_ptr = p;  // HERE\n"),
    "persisting L2 limit": ("l2_persistence", V,
                            "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n);  // HERE\n"),
    "fopen": ("file_access", V, 'FILE* f = fopen("out.bin", "wb");  // HERE\n'),
    "open()": ("file_access", V, 'int fd = open("x", 0);  // HERE\n'),
    "std::ofstream": ("file_access", V, 'std::ofstream out("times.txt");  // HERE\n'),
    "unlink()": ("file_access", V, 'unlink("result.json");  // HERE\n'),
    "clock_gettime": ("timer_access", V, "clock_gettime(CLOCK_MONOTONIC, &ts);  // HERE\n"),
    "std::chrono": ("timer_access", V, "auto t = std::chrono::steady_clock::now();  // HERE\n"),
    "cudaEventRecord": ("timer_access", V, "cudaEventRecord(start, stream);  // HERE\n"),
    "rdtsc in inline asm": ("timer_access", V, 'asm volatile("rdtsc" : "=a"(lo));  // HERE\n'),
    "std::thread": ("native_thread", W, "std::thread worker(run);  // HERE\n"),
    "pthread_create": ("native_thread", W, "pthread_create(&t, nullptr, run, nullptr);  // HERE\n"),
    "cudaStreamCreate": ("side_stream", W, "cudaStreamCreate(&side);  // HERE\n"),
    "cudaStreamNonBlocking": ("side_stream", W,
                              "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);  // HERE\n"),
    "static pointer": ("native_state", W, "static float* cache = nullptr;  // HERE\n"),
    "static pointer declaration": ("native_state", W, "static const float *last;  // HERE\n"),
    "split by a line continuation": ("native_loader", V,
                                     'void* h = dlo\\\npen("x", 1);  // HERE\n'),
    "after a digit separator": ("native_loader", V,
                                "int n = 1'000; void* h = dlopen(0, 1); char c = 'x';  // HERE\n"),
    "after a multi-line comment": ("native_loader", V,
                                   "/* one\n   two */ dlopen(0, 1);  // HERE\n"),
}


@pytest.mark.parametrize("rule, severity, source", NATIVE_FIRES.values(), ids=NATIVE_FIRES.keys())
def test_native_rule_fires(tmp_path: Path, rule: str, severity: str, source: str) -> None:
    # A continued line counts as the line it starts on: the marker is on the last physical line.
    line = marked_line(source) - source.count("\\\n")
    assert_fires(native_findings(tmp_path, source), rule, severity, "kernels/k.cu", line)


NATIVE_NEAR_MISSES = {
    "words in comments": "// dlopen, fopen, system(), std::thread, cudaGraphLaunch\n"
                         "/* mprotect\n   static float* p; at::Tensor */\nint x = 0;\n",
    "words in strings": 'const char* m = "dlopen fopen( system( at::Tensor cudaEventRecord";\n'
                        "char c = 'a';\n",
    "member and longer names": "bool a = file.is_open(); int b = my_open(1); f.open(p);\n"
                               "p->close(); x.clone(); auto y = ptr->system(1); execute(2);\n",
    "static kernels and casts": "static __global__ void k(const float* __restrict__ x, int n);\n"
                                "float* q = static_cast<float*>(p);\n"
                                "static int calls = 0;\n",
    "includes and stream sync": "#include <cuda_runtime.h>\n#include <fstream>\n"
                                "#include <omp.h>\ncudaStreamSynchronize(stream);\n"
                                "cudaEventSynchronize(e);\n",
    "names containing rule words": "int flat = 0; float format_at = 1; int open_count = 2;\n"
                                   "int graph_size = 3; int my_fork = 4; int systematic = 5;\n",
}


@pytest.mark.parametrize("source", NATIVE_NEAR_MISSES.values(), ids=NATIVE_NEAR_MISSES.keys())
def test_native_near_miss_does_not_fire(tmp_path: Path, source: str) -> None:
    assert native_findings(tmp_path, source) == []


@pytest.mark.parametrize("name", ["kernels/k.cpp", "kernels/sub/k.cuh", "kernels/k.h"])
def test_every_kernel_source_is_checked(tmp_path: Path, name: str) -> None:
    found = native_findings(tmp_path, "void* h = dlopen(0, 1);\n", name)
    assert [(f["file"], f["rule"]) for f in found] == [(name, "native_loader")]


def test_findings_are_sorted_and_deduplicated(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "exec('1'); exec('2')\nimport ctypes\n", {
        "kernels/b.cu": "fopen(a); fopen(b);\n",
        "kernels/a.cpp": "\n\ndlopen(0, 1);\nsystem(0);\n",
    })
    found = rules.check_workspace(workspace)["findings"]
    assert [(f["file"], f["line"], f["rule"]) for f in found] == [
        ("kernels/a.cpp", 3, "native_loader"), ("kernels/a.cpp", 4, "process_spawn"),
        ("kernels/b.cu", 1, "file_access"),
        ("model_new.py", 1, "forbidden_call"), ("model_new.py", 2, "forbidden_import")]


# --- parse errors and the script -------------------------------------------------------------


def test_syntax_error_is_a_parse_error_not_a_finding(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "import torch\n\ndef f(:\n    exec('x')\n",
                               {"kernels/k.cu": "dlopen(0, 1);\n"})
    report = rules.check_workspace(workspace)
    assert report["parse_error"].startswith("model_new.py:3: ")
    assert [f["file"] for f in report["findings"]] == ["kernels/k.cu"]


def test_nesting_too_deep_to_compile_is_a_parse_error(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "x = " + "+".join(["1"] * 20_000) + "\nimport ctypes\n")
    report = rules.check_workspace(workspace)
    assert report["ok"] and report["findings"] == []
    assert report["parse_error"] == "model_new.py:0: nested too deeply to compile"


def test_missing_model_new_is_a_parse_error(tmp_path: Path) -> None:
    report = rules.check_workspace(make_workspace(tmp_path, model_new=None))
    assert report["ok"] and report["findings"] == []
    assert report["parse_error"] == "model_new.py:0: the workspace has no model_new.py"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-E", "-s", str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=30)


def test_script_writes_the_report(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "w", "import torch\nimport ctypes\n")
    report = tmp_path / "report.json"
    result = run_script("--workspace", str(workspace), "--report", str(report))
    assert result.returncode == 0, result.stderr
    body = json.loads(report.read_text())
    assert body == rules.check_workspace(workspace)
    assert body["findings"][0]["detail"].startswith("line 2 imports ctypes: ")
    assert not (tmp_path / "report.json.tmp").exists()


def test_script_reports_a_syntax_error_without_crashing(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "w", "class ModelNew(:\n")
    report = tmp_path / "report.json"
    assert run_script("--workspace", str(workspace), "--report", str(report)).returncode == 0
    body = json.loads(report.read_text())
    assert body["ok"] and body["parse_error"].startswith("model_new.py:1: ")


def test_script_reports_a_missing_workspace_as_usage(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = run_script("--workspace", str(tmp_path / "nowhere"), "--report", str(report))
    assert result.returncode == 0
    body = json.loads(report.read_text())
    assert body["ok"] is False and body["error_kind"] == "usage"
    assert "nowhere" in body["error"] and "not a folder" in body["error"]


def test_script_reports_bad_arguments_as_usage(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    assert run_script("--report", str(report), "--bogus").returncode == 0
    body = json.loads(report.read_text())
    assert body["ok"] is False and body["error_kind"] == "usage"


def test_script_without_report_exits_2() -> None:
    result = run_script("--workspace", ".")
    assert result.returncode == 2 and "--report" in result.stderr


def test_script_does_not_import_torch(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "w")
    probe = (f"import sys; sys.path.insert(0, {str(SCRIPT.parent)!r}); import rules; "
             f"rules.main(['--workspace', {str(workspace)!r}, '--report', "
             f"{str(tmp_path / 'r.json')!r}]); print(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('torch', 'numpy')))")
    result = subprocess.run([sys.executable, "-E", "-s", "-c", probe], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
