"""Calls the workspace's compiled kernels from model_new.py, through ctypes.

The evaluator compiles kernels/ into one shared library and names it in the environment variable
CUDA_AGENT_KERNEL_LIB. Each kernel entry is a plain C function returning int (0 = success):

    extern "C" int scale_relu(const float* x, float* y, int64_t n, float scale, void* stream);

and model_new.py binds it once, then calls it with tensors and numbers:

    from utils.kernels import load
    lib = load()
    scale_relu = lib.bind("scale_relu", "tensor", "tensor", "i64", "f32", "stream")
    scale_relu(x, y, x.numel(), 2.0)

A "tensor" parameter receives tensor.data_ptr() (the kernel assumes the layout it was written
for: make tensors contiguous first). It also takes any object with data_ptr() and device, such
as part of a tensor whose address the caller worked out (no view made: a view is an aten op,
which the evaluator's dispatch guard sees at host-time cost). A "stream" parameter is not passed by the caller: it
receives the current CUDA stream of the first tensor argument's device, or 0 on the CPU.

ctypes converts each argument on every call, about a third of a microsecond apiece: a kernel of
sixty sizes spends more host time on its call than on the rest of its caller. Where every
parameter is a tensor, an i32, an i64 or the stream, the library may also define

    extern "C" int scale_relu_packed(const int64_t* words);

taking the same arguments as 64-bit words in order (tensors and the stream by address); bind()
then calls it with all of them packed into one buffer.
"""

import ctypes
import functools
import os
import struct
from typing import Any, Callable

import torch

ENV = "CUDA_AGENT_KERNEL_LIB"

PARAMETER_TYPES = {
    "tensor": ctypes.c_void_p,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "stream": ctypes.c_void_p,
}

# The parameter types a NAME_packed entry takes as 64-bit words.
PACKED_TYPES = frozenset({"tensor", "i32", "i64", "stream"})


class KernelLibrary:
    """One loaded shared library; bind() makes Python callables of its functions."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lib = ctypes.CDLL(path)
        self._error_string = getattr(self._lib, "cuda_agent_error_string", None)
        if self._error_string is not None:
            self._error_string.argtypes = [ctypes.c_int]
            self._error_string.restype = ctypes.c_char_p

    def bind(self, name: str, *parameters: str) -> Callable[..., None]:
        unknown = [p for p in parameters if p not in PARAMETER_TYPES]
        if unknown:
            raise ValueError(f"bind({name!r}): unknown parameter type(s) {unknown}; "
                             f"use {', '.join(PARAMETER_TYPES)}")
        try:
            function = getattr(self._lib, name)
        except AttributeError:
            raise AttributeError(
                f"{self.path} has no function {name!r}: declare it extern \"C\" (so its name is "
                "not mangled) and make sure its file is under kernels/") from None
        function.argtypes = [PARAMETER_TYPES[p] for p in parameters]
        function.restype = ctypes.c_int
        packed = getattr(self._lib, name + "_packed", None)
        if packed is not None and set(parameters) <= PACKED_TYPES:
            packed.argtypes = [ctypes.c_char_p]
            packed.restype = ctypes.c_int
            words = struct.Struct(f"={len(parameters)}q")
        else:
            packed = None
        caller_types = [p for p in parameters if p != "stream"]
        tensor_slots = tuple(i for i, p in enumerate(caller_types) if p == "tensor")
        stream_slots = tuple(i for i, p in enumerate(parameters) if p == "stream")
        arity = len(caller_types)
        signature = f"{name}({', '.join(caller_types)})"
        raise_error = self._raise_error

        def call(*args: Any) -> None:
            if len(args) != arity:
                raise TypeError(f"{signature} takes {arity} arguments, got {len(args)}")
            values = list(args)
            device = None
            for i in tensor_slots:
                tensor = values[i]
                # type() first: isinstance goes through torch.Tensor's metaclass (0.1 us).
                if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.Tensor) \
                        and not (hasattr(tensor, "data_ptr") and hasattr(tensor, "device")):
                    raise TypeError(f"{signature}: argument {i} must be a torch.Tensor, "
                                    f"got {type(tensor).__name__}")
                values[i] = tensor.data_ptr()
                if device is None:
                    device = tensor.device
            if stream_slots:
                stream = _stream_handle(device)
                for i in stream_slots:
                    values.insert(i, stream)
            if packed is None:
                code = function(*values)
            else:
                try:
                    buffer = words.pack(*values)
                except struct.error as error:
                    raise TypeError(f"{signature}: {error}") from None
                code = packed(buffer)
            if code != 0:
                raise_error(name, code)

        call.__name__ = name
        call.__doc__ = signature
        return call

    def _raise_error(self, name: str, code: int) -> None:
        text = ""
        if self._error_string is not None:
            message = self._error_string(code)
            if message:
                text = f": {message.decode(errors='replace')}"
        raise RuntimeError(f"kernel function {name} returned error code {code}{text}")


# The raw handle without building a torch.cuda.Stream: a tenth of the cost per call.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream_handle(device: torch.device | None) -> int:
    if device is None or device.type != "cuda":
        return 0
    if _current_raw_stream is not None:
        return _current_raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


@functools.cache
def _load(path: str) -> KernelLibrary:
    return KernelLibrary(path)


def load() -> KernelLibrary:
    """The kernel library named by CUDA_AGENT_KERNEL_LIB (loaded once per process)."""
    path = os.environ.get(ENV)
    if not path:
        raise RuntimeError(f"{ENV} is not set: the evaluator sets it to the compiled kernel "
                           "library before it imports model_new.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"kernel library {path} (from {ENV}) does not exist: "
                                "were the kernels compiled?")
    return _load(path)
