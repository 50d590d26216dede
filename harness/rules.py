"""Static rules over a candidate workspace's sources, checked before any of its code runs.

One defence layer against candidates that try to fool the benchmark (the T, S and B families of
exploits): model_new.py and the other Python files the candidate wrote are read with ast, the
sources under kernels/ line by line with regular expressions, and each construct that has no place
in an honest kernel (ctypes, exec, monkey-patching, torch called from C++, CUDA graphs, timers...)
is reported with its file and line. A violation rejects the candidate; a warning marks something
that may be legal and that the run-time checks look at again. Standard library only, so it starts
in tens of milliseconds:

    python3 -E -s harness/rules.py --workspace W --report R

The report: {"ok": true, "findings": [{"rule", "severity", "file", "line", "detail"}], "files":
[checked files], "parse_error": null | "model_new.py:LINE: message"}, or {"ok": false,
"error_kind": "usage" | "internal", "error": "..."}. check_workspace(path) returns the body.
"""

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple

VIOLATION = "violation"
WARNING = "warning"


class Rule(NamedTuple):
    """A Python rule. A detail reads "line N <what the code does>: <why>"."""

    name: str
    severity: str
    why: str


class NativeRule(NamedTuple):
    """One pattern of a native rule, searched in each line of a kernel source after comments are
    removed and, unless in_strings, after string and character literals are emptied."""

    name: str
    severity: str
    pattern: str
    why: str
    in_strings: bool = False


PYTHON_RULES = {rule.name: rule for rule in (
    Rule("forbidden_import", VIOLATION, "the module reaches the process, memory, timers, torch "
         "internals or the evaluator, none of which candidate code may touch"),
    Rule("forbidden_call", VIOLATION, "dynamic code, reflection and file or console access are "
         "not allowed in candidate code"),
    Rule("forbidden_attribute", VIOLATION, "torch internals, compilers, graphs, backend flags and "
         "dunder attributes are out of bounds for candidate code"),
    Rule("monkey_patch", VIOLATION, "changing objects the candidate did not create here (modules, "
         "classes, shared instances) is not allowed"),
    Rule("precision_changed", VIOLATION, "numeric precision is set by the evaluator, not by the "
         "candidate"),
    Rule("fallback", WARNING, "a fallback path is not allowed to use torch compute; the evaluator "
         "checks that at run time"),
    Rule("module_state", WARNING, "state kept across calls is not allowed; the evaluator checks "
         "fresh modules at run time"),
    Rule("unknown_import", WARNING, "the module is not on the list of known imports; what it does "
         "is checked at run time"),
)}

FORBIDDEN_MODULES = frozenset({
    "ctypes", "_ctypes", "threading", "_thread", "multiprocessing", "concurrent", "subprocess",
    "gc", "inspect", "importlib", "builtins", "sys", "os", "signal", "atexit", "time", "numpy",
    "cupy", "triton", "numba", "jax", "pickle", "marshal", "socket", "shutil", "tempfile",
    "pathlib", "io", "code", "codeop", "traceback", "weakref", "faulthandler", "resource", "mmap",
    "platform", "sysconfig", "site", "runpy", "zipimport", "pkgutil",
    "torch._C", "torch._dynamo", "torch._inductor", "torch.utils._python_dispatch",
    "torch.utils.cpp_extension", "torch.cuda.graphs", "torch.jit", "torch.compiler", "torch.fx",
    "torch.overrides", "torch.library", "torch.ops", "torch.backends", "torch.profiler",
    "torch.autograd.profiler",
    "model",  # the task's reference
    "common", "guard", "check", "prepare", "timing", "run_candidate", "rules",  # the harness
})
ALLOWED_MODULES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "math", "typing", "functools",
    "dataclasses", "collections", "itertools", "numbers", "operator", "enum", "abc", "__future__",
    "utils", "utils.kernels", "warnings",
})
FORBIDDEN_CALLS = frozenset({
    "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "open", "breakpoint",
    "input", "setattr", "delattr",
})
# Calls that read attributes by name, and which of their arguments are names: a literal name is
# checked like any attribute access, a computed one is not allowed.
REFLECTIVE_CALLS = {
    "getattr": slice(1, 2), "operator.attrgetter": slice(0, None),
    "operator.methodcaller": slice(0, 1),
}
ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__doc__", "__len__"})
ALLOWED_DUNDER_NAMES = ALLOWED_DUNDERS | {"__all__"}  # bare names (__builtins__, __file__ are not)
# Decorators that keep results across calls.
CACHING_DECORATORS = frozenset({"functools.cache", "functools.lru_cache",
                                "functools.cached_property"})
FORBIDDEN_ATTRIBUTES = frozenset({
    "_C", "_dynamo", "_inductor", "_python_dispatch", "_DisableTorchDispatch",
    "_EnableTorchFunction", "_DisableTorchFunction", "_ExcludeDispatchKeyGuard", "_pop_mode",
    "_push_mode", "graphs", "CUDAGraph", "make_graphed_callables", "jit", "_ops", "ops",
    "library", "overrides", "_refs", "_prims", "_decomp", "fx",
    # The profiler, whose record of a timed call's ops the timed calls' guard reads (guard.py).
    "profiler", "_enable_profiler", "_enable_profiler_legacy", "_disable_profiler",
    "_disable_profiler_legacy", "_prepare_profiler", "_profiler_enabled",
})
# Attributes forbidden only on one owner: torch.cuda.graph.
OWNED_ATTRIBUTES = {"graph": "torch.cuda"}
# Attributes forbidden on every owner but these: torch.compile and nn.Module.compile (so
# self.compile() too), while re.compile is fine.
ATTRIBUTES_ALLOWED_ON = {"compile": frozenset({"re", "regex"})}
FORBIDDEN_NAMESPACES = ("torch.backends",)
PRECISION_NAMES = frozenset({
    "allow_tf32", "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction", "set_float32_matmul_precision", "autocast",
})

_CALL = r"(?<![\w.])(?<!->)"  # a free call: not a member (x.open) and not part of a name (my_open)
NATIVE_RULES = (
    NativeRule("native_loader", VIOLATION, r"\b(?:dlopen|dlmopen|dlsym|dlvsym|LoadLibrary\w*)\b",
               "kernels may not load native code at run time"),
    NativeRule("torch_from_native", VIOLATION,
               r"#\s*include\s*[<\"][^>\"]*(?:\b(?:torch|ATen|c10|caffe2|pybind11)/|Python\.h)",
               "kernels must compute themselves, not call torch or Python", in_strings=True),
    NativeRule("torch_from_native", VIOLATION, r"\b(?:at|torch|c10|caffe2|pybind11|py)::",
               "kernels must compute themselves, not call torch or Python"),
    NativeRule("torch_from_native", VIOLATION, r"\bPy[A-Z]\w*\s*\(",
               "kernels may not call the Python C API"),
    NativeRule("native_patch", VIOLATION,
               r"\b(?:mprotect|ptrace|process_vm_writev|setenv|putenv)\b",
               "changing the process's memory or environment is not allowed"),
    NativeRule("native_patch", VIOLATION, r"/proc/self|\bLD_PRELOAD\b",
               "changing the process's memory or environment is not allowed", in_strings=True),
    NativeRule("process_spawn", VIOLATION, _CALL + r"(?:system|popen|fork|vfork|clone)\s*\(",
               "kernels may not start processes"),
    NativeRule("process_spawn", VIOLATION, r"\b(?:exec[lv]\w*|posix_spawn\w*)\b",
               "kernels may not start processes"),
    NativeRule("cuda_graph", VIOLATION,
               r"\b(?:cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cudaStreamEndCapture)\b",
               "replaying a captured graph is not computing; every call must launch its work"),
    NativeRule("l2_persistence", VIOLATION,
               r"\b(?:accessPolicyWindow|cudaLimitPersistingL2CacheSize|"
               r"cudaAccessPropertyPersisting|hitProp|cudaStreamAttributeAccessPolicyWindow|"
               r"cudaCtxResetPersistingL2Cache|CU_LIMIT_PERSISTING_L2_CACHE_SIZE)\b",
               "pinning data in L2 defeats the cache flush between timed calls"),
    NativeRule("file_access", VIOLATION, r"\b(?:fopen\w*|freopen\w*)\b",
               "kernels may not read or write files"),
    NativeRule("file_access", VIOLATION, _CALL + r"(?:open|openat|open64|creat|unlink|rename)\s*\(",
               "kernels may not read or write files"),
    NativeRule("file_access", VIOLATION, r"\b(?:std::)?[io]?fstream\b(?!\s*>)",
               "kernels may not read or write files"),
    NativeRule("timer_access", VIOLATION,
               r"\b(?:clock_gettime|gettimeofday|__rdtsc\w*|rdtsc\w*|cudaEventElapsedTime|"
               r"cudaEventRecord\w*|cuEventElapsedTime|cuEventRecord\w*|chrono::)",
               "kernels have no business reading or recording timers"),
    NativeRule("timer_access", VIOLATION, r"\brdtscp?\b",
               "kernels have no business reading or recording timers", in_strings=True),
    NativeRule("native_thread", WARNING,
               r"\bstd::(?:thread|async|jthread)\b|\bpthread_create\b",
               "work left running on another thread escapes the timer; checked at run time"),
    NativeRule("side_stream", WARNING,
               r"\b(?:cudaStreamCreate\w*|cudaStreamPerThread|cudaStreamNonBlocking)\b",
               "work on a stream other than the one passed in escapes the timer; checked at run "
               "time"),
    NativeRule("native_state", WARNING, r"\bstatic\b[^;(]*\*\s*\w+\s*(?:=|;)",
               "a static pointer keeps state across calls, which is not allowed"),
)
_NATIVE_PATTERNS = [(rule, re.compile(rule.pattern)) for rule in NATIVE_RULES]

NATIVE_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh",
                             ".inl"})
MODEL_NEW = "model_new.py"
TASK_FILE = "model.py"
TRUSTED_DIR = "utils"
KERNEL_DIR = "kernels"
SNIPPET_CHARS = 60
# ast visiting recurses once per level of nesting; this is deeper than CPython itself compiles, so
# a file too deep to check could not be imported either.
RECURSION_LIMIT = 10_000


def finding(rule: str, severity: str, file: str, line: int, what: str, why: str) -> dict[str, Any]:
    return {"rule": rule, "severity": severity, "file": file, "line": line,
            "detail": f"line {line} {what}: {why}"}


# --- Python ----------------------------------------------------------------------------------


def forbidden_module(name: str) -> bool:
    """True when the dotted module name or a package above it is forbidden."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in FORBIDDEN_MODULES for i in range(1, len(parts) + 1))


def attribute_problems(owner: str | None, name: str) -> list[str]:
    """The rules that reading attribute name of owner (a dotted name, None if unknown) breaks."""
    rules = []
    dunder = name.startswith("__") and name.endswith("__") and len(name) > 4
    if (dunder and name not in ALLOWED_DUNDERS) or name in FORBIDDEN_ATTRIBUTES:
        rules.append("forbidden_attribute")
    elif OWNED_ATTRIBUTES.get(name, "") == owner:
        rules.append("forbidden_attribute")
    elif name in ATTRIBUTES_ALLOWED_ON and owner not in ATTRIBUTES_ALLOWED_ON[name]:
        rules.append("forbidden_attribute")
    elif owner is not None and any(f"{owner}.{name}" == space
                                   or f"{owner}.{name}".startswith(f"{space}.")
                                   for space in FORBIDDEN_NAMESPACES):
        rules.append("forbidden_attribute")
    if name in PRECISION_NAMES:
        rules.append("precision_changed")
    return rules


def snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 3] + "..."


def chain_root(node: ast.AST) -> tuple[str | None, bool]:
    """The name an attribute/subscript/call chain starts from, and whether the chain reads an
    attribute on the way (a.b[0] does, a[0] does not)."""
    through_attribute = False
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        through_attribute |= isinstance(node, ast.Attribute)
        node = node.func if isinstance(node, ast.Call) else node.value
    return (node.id if isinstance(node, ast.Name) else None), through_attribute


def _scope_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function that belong to its own scope (nested defs and classes excluded)."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


class Scope(NamedTuple):
    """Where a store happens: "module", "class" or "function"; a function's local names, and the
    locals that only name something non-local (t = torch), so patching them patches that."""

    kind: str
    names: frozenset[str] = frozenset()
    aliases: frozenset[str] = frozenset()


def function_scope(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Scope:
    nodes = list(_scope_nodes(function))
    arguments = function.args
    names = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    declared, aliases = set(), set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):  # a module is no local object
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
    names = (names | aliases) - declared
    changed = True
    while changed:  # t = torch; u = t.nn: both alias non-local objects
        changed = False
        for node in nodes:
            if not (isinstance(node, ast.Assign)
                    and isinstance(node.value, (ast.Name, ast.Attribute))):
                continue
            root, _ = chain_root(node.value)
            if root is None or (root in names and root not in aliases):
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id not in aliases:
                    aliases.add(target.id)
                    changed = True
    return Scope("function", frozenset(names), frozenset(aliases))


class PythonChecker(ast.NodeVisitor):
    """Applies the Python rules to one parsed file."""

    def __init__(self, file: str, workspace: Path, tree: ast.Module) -> None:
        self.file = file
        self.workspace = workspace
        self.findings: list[dict[str, Any]] = []
        self.scopes = [Scope("module")]
        self.imported: dict[str, str] = {}  # bound name -> the dotted name it was imported as
        self.bound: set[str] = set()  # every name the file binds, so a shadowed builtin is not one
        self.called: set[int] = set()  # ids of the Name nodes that are called (checked as calls)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    self.imported[bound] = a.name if a.asname else bound
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    self.imported[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)

    def report(self, rule: str, node: ast.AST, what: str) -> None:
        spec = PYTHON_RULES[rule]
        self.findings.append(finding(rule, spec.severity, self.file, getattr(node, "lineno", 1),
                                     what, spec.why))

    def dotted(self, node: ast.AST) -> str | None:
        """torch.cuda for `torch.cuda`, torch.nn.functional for `F` after `import ... as F`."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return ".".join([self.imported.get(node.id, node.id), *reversed(parts)])

    # Imports.

    def check_module(self, node: ast.AST, module: str, what: str) -> None:
        if forbidden_module(module):
            self.report("forbidden_import", node, what)
        elif module not in ALLOWED_MODULES and not self.own_module(module):
            self.report("unknown_import", node, what)

    def own_module(self, module: str) -> bool:
        top = module.split(".")[0]
        return (self.workspace / f"{top}.py").is_file() or (self.workspace / top).is_dir()

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(node, a.name, f"imports {a.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level > 0 or not node.module:
            return  # the candidate's own files, checked on their own
        module = node.module
        for a in node.names:
            what = f"imports {a.name} from {module}"
            if forbidden_module(module) or forbidden_module(f"{module}.{a.name}"):
                self.report("forbidden_import", node, what)
                continue
            for rule in attribute_problems(module, a.name):
                self.report(rule, node, what)
        if not forbidden_module(module):
            self.check_module(node, module, f"imports from {module}")

    # Names, attributes and calls.

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        builtin = name not in self.bound
        if name in FORBIDDEN_CALLS or name in REFLECTIVE_CALLS:
            # A reference that is not a call: f = eval; f(...).
            if builtin and isinstance(node.ctx, ast.Load) and id(node) not in self.called:
                self.report("forbidden_call", node, f"uses the builtin {name}")
        elif name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDER_NAMES:
            self.report("forbidden_attribute", node, f"uses {name}")
        if name in PRECISION_NAMES:
            self.report("precision_changed", node, f"uses {name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        for rule in attribute_problems(self.dotted(node.value), node.attr):
            self.report(rule, node, f"uses {snippet(node)}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = self.dotted(node.func)
        self.called.add(id(node.func))
        name = function.rsplit(".", 1)[-1] if function else None
        if name in FORBIDDEN_CALLS and function in (name, f"builtins.{name}"):
            self.report("forbidden_call", node, f"calls {name}()")
        if function in REFLECTIVE_CALLS:
            owner = self.dotted(node.args[0]) if function == "getattr" and node.args else None
            for argument in node.args[REFLECTIVE_CALLS[function]]:
                if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                    self.report("forbidden_call", node,
                                f"calls {name}() with a computed attribute name")
                    continue
                for attribute in argument.value.split("."):
                    for rule in attribute_problems(owner, attribute):
                        self.report(rule, node, f"calls {name}() for {attribute!r}")
        self.generic_visit(node)

    # Stores, scopes and control flow.

    def check_store(self, target: ast.Attribute | ast.Subscript) -> None:
        """Flags a store into an object this scope did not create."""
        root, through_attribute = chain_root(target)
        scope = self.scopes[-1]
        if root is None or (root == "self" and scope.kind == "function"):
            return
        foreign = scope.kind != "function" or root not in scope.names or root in scope.aliases
        if not foreign:
            return
        verb = "deletes" if isinstance(target.ctx, ast.Del) else "assigns"
        if through_attribute:
            self.report("monkey_patch", target, f"{verb} {snippet(target)}")
        elif scope.kind == "function":
            self.report("module_state", target,
                        f"{verb} {snippet(target)}, an item of the module-level {root}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for decorator in getattr(node, "decorator_list", []):
            wrapped = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.dotted(wrapped) in CACHING_DECORATORS:
                self.report("module_state", decorator,
                            f"caches the results of {node.name} with {snippet(decorator)}")
        self.scopes.append(function_scope(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(Scope("class"))
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Try(self, node: ast.Try) -> None:
        if node.handlers:
            self.report("fallback", node, "has a try statement with an except handler")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        keyword = "global" if isinstance(node, ast.Global) else "nonlocal"
        self.report("module_state", node, f"declares {keyword} {', '.join(node.names)}")

    visit_Nonlocal = visit_Global


def check_python(file: str, workspace: Path, source: bytes) -> list[dict[str, Any]]:
    """The Python findings of one file; raises SyntaxError or ValueError when it does not parse,
    RecursionError when it nests deeper than RECURSION_LIMIT."""
    tree = ast.parse(source, filename=file)
    checker = PythonChecker(file, workspace, tree)
    checker.visit(tree)
    return checker.findings


# --- native ----------------------------------------------------------------------------------

_NATIVE_TOKEN = re.compile(r"""
    (?P<number> (?<![\w']) \d [\w']* )                  # 1'000'000: a digit separator is no quote
  | (?P<comment> //[^\n]* | /\*.*?\*/ )
  | (?P<literal> (?<!\w) (?:u8|[uUL])? R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)"
               | "(?:\\.|[^"\\\n])*" | '(?:\\.|[^'\\\n])*' )
""", re.S | re.X)


def strip_native(text: str) -> list[tuple[int, str, str]]:
    """(line number, code, bare) per logical line: code without comments, and bare with string
    and character literals emptied too. Backslash-continued lines are joined first, as the
    compiler does, and numbered by their first line."""
    physical = text.replace("\r\n", "\n").split("\n")
    logical, numbers = [], []
    i = 0
    while i < len(physical):
        numbers.append(i + 1)
        line = physical[i]
        while line.endswith("\\") and i + 1 < len(physical):
            i += 1
            line = line[:-1] + physical[i]
        logical.append(line)
        i += 1
    joined = "\n".join(logical)

    def without(kinds: tuple[str, ...]):
        def replace(match: re.Match) -> str:
            kind = match.lastgroup if match.lastgroup != "delim" else "literal"
            if kind not in kinds:
                return match.group(0)
            newlines = "\n" * match.group(0).count("\n")
            return (" " if kind == "comment" else '""') + newlines
        return replace

    code = _NATIVE_TOKEN.sub(without(("comment",)), joined).split("\n")
    bare = _NATIVE_TOKEN.sub(without(("comment", "literal")), joined).split("\n")
    return list(zip(numbers, code, bare))


def check_native(file: str, text: str) -> list[dict[str, Any]]:
    """The native findings of one kernel source."""
    findings = []
    for number, code, bare in strip_native(text):
        for rule, pattern in _NATIVE_PATTERNS:
            match = pattern.search(code if rule.in_strings else bare)
            if match:
                findings.append(finding(rule.name, rule.severity, file, number,
                                        f"uses {match.group(0).strip()}", rule.why))
    return findings


# --- the workspace ---------------------------------------------------------------------------


def workspace_files(workspace: Path) -> tuple[list[str], list[str]]:
    """(Python files, kernel sources) to check, relative to the workspace: every .py file but the
    trusted utils/ and the task's model.py, and every source under kernels/."""
    python, native = [], []
    for folder, folders, names in os.walk(workspace):
        relative = Path(folder).relative_to(workspace)
        folders[:] = sorted(f for f in folders if f != "__pycache__"
                            and not (relative == Path(".") and f == TRUSTED_DIR))
        for name in sorted(names):
            path = (relative / name).as_posix()
            if name.endswith(".py") and path != TASK_FILE:
                python.append(path)
            elif relative.parts[:1] == (KERNEL_DIR,) and Path(name).suffix in NATIVE_SUFFIXES:
                native.append(path)
    return python, native


def read(path: Path) -> bytes:
    """A file's bytes; nothing for one that cannot be read (a dangling link), which neither the
    compiler nor Python could use either."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def check_workspace(path: str | os.PathLike) -> dict[str, Any]:
    """The report body for one workspace: findings sorted by file and line, one per rule, file
    and line; the files checked; and model_new.py's syntax error, if any."""
    workspace = Path(path)
    if not workspace.is_dir():
        raise FileNotFoundError(f"workspace {path} is not a folder")
    python, native = workspace_files(workspace)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    findings: list[dict[str, Any]] = []
    parse_error = None
    if MODEL_NEW not in python:
        parse_error = f"{MODEL_NEW}:0: the workspace has no {MODEL_NEW}"
    for file in python:
        try:
            findings += check_python(file, workspace, read(workspace / file))
        except (SyntaxError, ValueError, RecursionError) as error:
            # Not a finding: the loader reports model_new.py's error; a helper that does not
            # parse (or nests too deep to compile) cannot be imported either.
            if file == MODEL_NEW:
                line = getattr(error, "lineno", None) or 0
                message = ("nested too deeply to compile" if isinstance(error, RecursionError)
                           else getattr(error, "msg", None) or str(error))
                parse_error = f"{MODEL_NEW}:{line}: {message}"
    for file in native:
        text = read(workspace / file).decode("utf-8", errors="replace")
        findings += check_native(file, text)
    unique = {}
    for f in findings:
        unique.setdefault((f["rule"], f["file"], f["line"]), f)
    ordered = sorted(unique.values(), key=lambda f: (f["file"], f["line"], f["rule"]))
    return {"ok": True, "findings": ordered, "files": sorted(python + native),
            "parse_error": parse_error}


# --- the script ------------------------------------------------------------------------------


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rules.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", required=True,
                        help="the candidate's folder: model_new.py and kernels/")
    parser.add_argument("--report", required=True, help="where the JSON report is written")
    return parser


def write_report(path: str, report: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    parser = make_parser()
    if "-h" in argv or "--help" in argv:
        parser.print_help()
        return 0
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--report")
    report_path = pre.parse_known_args(argv)[0].report
    if report_path is None:
        print("rules.py: --report is required", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
        if not os.path.isdir(args.workspace):
            raise UsageError(f"--workspace {args.workspace} is not a folder")
        report = check_workspace(args.workspace)
    except UsageError as error:
        report = {"ok": False, "error_kind": "usage", "error": str(error)}
    except Exception as error:  # noqa: BLE001 - every failure ends up in the report
        report = {"ok": False, "error_kind": "internal",
                  "error": f"{type(error).__name__}: {error}"}
    write_report(report_path, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
