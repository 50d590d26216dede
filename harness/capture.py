"""A task's computation as a graph IR (JSON): what `tasks check` compares tasks by, and what the
synthesizer reads. The model is traced with torch.export on the meta device, so a task at full
size costs no memory and no compute; a task that cannot be built on meta is traced on the real
inputs it was given instead.

Schema cuda-agent.graph/1:
  inputs   [{name, kind: parameter|buffer|constant|input, target, shape, dtype, stride}]
  nodes    [{name, op, args, kwargs, shape, dtype, stride}]  (op: "aten.linear.default", ...;
           an argument that is another value is {"ref": name}; a node with several results has
           shape/dtype/stride lists, one per result)
  outputs  [name, ...]
"""

import startup  # noqa: F401  (first: no garbage collection while modules load)

import json
from types import ModuleType
from typing import Any, Callable

import torch

import common

SCHEMA = "cuda-agent.graph/1"

_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant",
          "USER_INPUT": "input"}


def _encode(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"ref": value.name}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)  # dtypes, devices, memory formats, layouts


def _meta_fields(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."),
                "stride": list(value.stride())}
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        parts = [_meta_fields(v) for v in value]
        return {key: [p.get(key) for p in parts] for key in ("shape", "dtype", "stride")}
    if isinstance(value, (int, float, bool)):
        return {"shape": None, "dtype": type(value).__name__, "stride": None}
    return {"shape": None, "dtype": None, "stride": None}


def _op_name(target: Any) -> str:
    """"aten.linear.default" for an aten overload; "operator.getitem" for a Python function."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    return f"{module.lstrip('_')}.{getattr(target, '__name__', str(target))}".lstrip(".")


def graph_ir(program: torch.export.ExportedProgram) -> dict[str, Any]:
    specs = {spec.arg.name: spec for spec in program.graph_signature.input_specs
             if hasattr(spec.arg, "name")}
    inputs, nodes, outputs = [], [], []
    for node in program.graph.nodes:
        fields = _meta_fields(node.meta.get("val"))
        if node.op == "placeholder":
            spec = specs.get(node.name)
            kind = _KINDS.get(spec.kind.name, spec.kind.name.lower()) if spec else "input"
            inputs.append({"name": node.name, "kind": kind,
                           "target": getattr(spec, "target", None) if spec else None, **fields})
        elif node.op == "call_function":
            nodes.append({"name": node.name, "op": _op_name(node.target),
                          "args": _encode(node.args),
                          "kwargs": _encode(node.kwargs), **fields})
        elif node.op == "output":
            outputs = [v.name for v in node.args[0] if isinstance(v, torch.fx.Node)]
    return {"schema": SCHEMA, "inputs": inputs, "nodes": nodes, "outputs": outputs}


def _export(model: torch.nn.Module, inputs: list) -> dict[str, Any]:
    program = torch.export.export(model, tuple(inputs), strict=False)
    return graph_ir(program)


def capture_task(task: ModuleType, build: Callable[[], tuple[torch.nn.Module, list]]
                 ) -> dict[str, Any]:
    """The task's graph IR, traced on meta (no memory or compute at any size); where the task
    cannot be built on meta, `build()` gives a real model and inputs to trace instead. Raises
    when neither traces, with the reason of the last attempt."""
    try:
        with torch.device("meta"):
            model = task.Model(*task.get_init_inputs())
            inputs = list(task.get_inputs())
        inputs = [v.to("meta") if isinstance(v, torch.Tensor) else v for v in inputs]
        return {**_export(model, inputs), "traced_on": "meta"}
    except Exception:  # a task that needs real data to build (.item(), numpy, ...)
        model, inputs = build()
        return {**_export(model, inputs), "traced_on": "real"}


# --- as a script: one task's graph IR to a file ------------------------------------------------


def make_parser():
    parser = common.make_parser("Writes a task's graph IR (schema cuda-agent.graph/1) to --out.")
    parser.add_argument("--task", required=True, help="KernelBench-format task file")
    parser.add_argument("--out", required=True, help="where the graph IR JSON goes")
    return parser


def main(args: Any, report: dict) -> None:
    task = common.load_task(args.task)
    report["sizes"] = common.shrink_task(task, args.shrink)

    def build() -> tuple[torch.nn.Module, list]:
        torch.manual_seed(0)
        model = task.Model(*task.get_init_inputs())
        return model, list(task.get_inputs())

    try:
        graph = capture_task(task, build)
    except Exception as error:
        raise common.TaskError(f"torch.export cannot trace the task: {type(error).__name__}: "
                               f"{error}") from error
    common.write_text_atomic(args.out, json.dumps(graph))
    report["traced_on"] = graph["traced_on"]
    report["nodes"] = len(graph["nodes"])


if __name__ == "__main__":
    common.run_script(make_parser(), main)
