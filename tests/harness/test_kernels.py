"""utils/kernels.py, the ctypes binding model_new.py calls compiled kernels through."""

import importlib.util

import pytest
import torch

from conftest import HARNESS, build_library

SOURCE = r"""
#include <cstdint>
extern "C" int scale_relu(const float* x, float* y, int64_t n, float scale, void* stream) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.f ? x[i] : 0.f) * scale;
  return 0;
}
extern "C" int stream_is_null(void* stream, int32_t* out) { *out = stream == nullptr; return 0; }
extern "C" int add_scalars(double a, int32_t b, double* out) { *out = a + b; return 0; }
extern "C" int always_fails(void* stream) { return 7; }
// A packed companion whose parameters include an f32: bind must not call it.
extern "C" int scale_relu_packed(const int64_t* words) { return 9; }
// out[0] = x[0] + a + b, out[1] = whether the stream is null; the packed entry also sets out[2].
extern "C" int offsets(const int64_t* x, int64_t* out, int64_t a, int32_t b, void* stream) {
  out[0] = x[0] + a + b;
  out[1] = stream == nullptr;
  return 0;
}
extern "C" int offsets_packed(const int64_t* w) {
  int64_t* out = reinterpret_cast<int64_t*>(w[1]);
  out[2] = 1;
  return offsets(reinterpret_cast<const int64_t*>(w[0]), out, w[2], static_cast<int32_t>(w[3]),
                 reinterpret_cast<void*>(w[4]));
}
extern "C" const char* cuda_agent_error_string(int code) {
  return code == 7 ? "seven went wrong" : "unknown error";
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    spec = importlib.util.spec_from_file_location(
        "workspace_kernels", HARNESS / "workspace" / "utils" / "kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lib(kernels, tmp_path_factory):
    path = build_library(tmp_path_factory.mktemp("kernels"), "kernels", SOURCE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(kernels.ENV, str(path))
        return kernels.load()


def test_tensor_and_scalar_arguments_reach_the_kernel(lib) -> None:
    scale_relu = lib.bind("scale_relu", "tensor", "tensor", "i64", "f32", "stream")
    x = torch.randn(1000)
    y = torch.empty_like(x)
    scale_relu(x, y, x.numel(), 2.5)
    torch.testing.assert_close(y, torch.relu(x) * 2.5)


def test_stream_is_filled_in_and_zero_on_cpu(lib) -> None:
    stream_is_null = lib.bind("stream_is_null", "stream", "tensor")
    out = torch.zeros(1, dtype=torch.int32)
    stream_is_null(out)
    assert out.item() == 1


def test_f64_and_i32(lib) -> None:
    add = lib.bind("add_scalars", "f64", "i32", "tensor")
    out = torch.zeros(1, dtype=torch.float64)
    add(0.25, 3, out)
    assert out.item() == 3.25


def test_non_tensor_for_a_tensor_parameter_is_a_type_error(lib) -> None:
    scale_relu = lib.bind("scale_relu", "tensor", "tensor", "i64", "f32", "stream")
    x = torch.randn(4)
    with pytest.raises(TypeError, match="argument 1 must be a torch.Tensor, got int"):
        scale_relu(x, 0, 4, 1.0)
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        scale_relu(x, x, 4)


def test_a_packed_companion_takes_every_argument_in_one_buffer(lib) -> None:
    offsets = lib.bind("offsets", "tensor", "tensor", "i64", "i32", "stream")
    x = torch.tensor([1 << 40], dtype=torch.int64)
    out = torch.zeros(3, dtype=torch.int64)
    offsets(x, out, -(1 << 35), -7)
    assert out.tolist() == [(1 << 40) - (1 << 35) - 7, 1, 1]  # through offsets_packed
    with pytest.raises(TypeError, match=r"offsets\(tensor, tensor, i64, i32\): "):
        offsets(x, out, 2.5, 1)
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        offsets(x, out, 1)


def test_nonzero_return_raises_with_the_library_error_text(lib) -> None:
    always_fails = lib.bind("always_fails", "stream")
    with pytest.raises(RuntimeError, match="always_fails returned error code 7: seven went wrong"):
        always_fails()


def test_unknown_symbol_says_extern_c(lib) -> None:
    with pytest.raises(AttributeError, match=r'no function .scale_relu_v2.*extern "C"'):
        lib.bind("scale_relu_v2", "tensor")


def test_unknown_parameter_type(lib) -> None:
    with pytest.raises(ValueError, match="unknown parameter type"):
        lib.bind("scale_relu", "tensor", "float")


def test_load_without_or_with_a_missing_library(kernels, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(kernels.ENV, raising=False)
    with pytest.raises(RuntimeError, match="CUDA_AGENT_KERNEL_LIB is not set"):
        kernels.load()
    monkeypatch.setenv(kernels.ENV, str(tmp_path / "libmissing.so"))
    with pytest.raises(FileNotFoundError, match="libmissing.so"):
        kernels.load()
