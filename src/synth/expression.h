/// The per-element arithmetic every fused kernel shares: how one elementwise aten op is written
/// as a float expression of its operands' expressions, the same text for the C++ (OpenMP) and
/// the CUDA backends. The elementwise plan and the row plan both build their kernel bodies from
/// these expressions.
#pragma once

#include <string>
#include <vector>

#include "synth/graph.h"

namespace cuda_agent::synth {

/// A float literal for C++ and CUDA: exact to float precision, with the f suffix.
std::string literal(double v);

/// An op's argument: positional index, else keyword name, else null.
const nlohmann::json& argument(const Op& op, std::size_t index, const char* name);

/// Whether op (by base name) is one elementwise_expression writes.
bool is_elementwise_op(const std::string& base_name);

/// The float expression of op given its operands' expressions, one per argument position, ""
/// where the argument is not a tensor (a scalar argument is read from op.args as a literal). An
/// argument the op cannot take (a rounding mode, a non-number in place of a scalar) sets
/// *problem to a sentence naming it.
std::string elementwise_expression(const Op& op, const std::vector<std::string>& operands,
                                   std::string* problem);

/// The float expression of an arange op (arange(end), arange(start, end) or arange(start, end,
/// step)) at position k of the dim it runs along, "(start + step * (float)k)": a kernel's own
/// index rather than a tensor. *exact: whether the positions are torch's float32 values bit for
/// bit (integer starts and steps, below 2^24). "" where start or step is no number.
std::string position_expression(const Op& op, bool* exact);

/// Whether elementwise_expression computes op's float32 result bit for bit as eager torch does:
/// a selection (relu, clamp, abs, ...) or one correctly rounded operation (+, -, *, sqrt). Only
/// such a result, from operands that are exact too, is rounded to a 16-bit dtype between ops.
/// Rounding a value that differs from torch's in its last float32 bits (a transcendental, a
/// fast division, a reduction summed in another order) would sometimes land it one 16-bit step
/// away from torch's, and everything computed from it with it; kept in float32, it stays within
/// half a step everywhere, and the store rounds it once.
bool rounds_exactly(const Op& op);

/// Whether the kernels read and write tensors of this dtype: float32, bfloat16 and float16.
/// Whatever the dtype, they compute in float32.
bool is_float_dtype(const std::string& dtype);

/// Whether dtype is one of the 16-bit floats: bfloat16 or float16.
bool is_16_bit_float(const std::string& dtype);

/// Whether the kernels read tensors of this dtype: the float dtypes, bool (a mask or a
/// condition, read as 1.0f or 0.0f) and int64 (an index, read as a float: exact below 2^24).
bool is_input_dtype(const std::string& dtype);

/// The element type in kernel code: "float", "sa_bf16", "sa_f16", "bool" or "int64_t".
std::string element_type(const std::string& dtype);

/// expression rounded to dtype's precision, as torch rounds the result of each op on bfloat16
/// and float16 tensors (computed in float32, stored in the narrow type); unchanged for float32.
std::string rounded(const std::string& expression, const std::string& dtype);

/// The element types and their helpers for device "cpu" or "cuda": sa_load(x) (to float),
/// sa_store(pointer, value) (from float, rounding to nearest even; int64 as it is), and
/// sa_round_bfloat16 / sa_round_float16, sa_exp_shifted(x) (e^x for x <= 0) and sa_div(a, b)
/// (on CUDA the hardware's approximations, as Triton's); on CUDA also sa_load4 / sa_store4 and
/// sa_load8 / sa_store8 (four or eight elements at an aligned address, one access each),
/// sa_load_v<V> / sa_store_v<V> (V = 8, 4 or 1) and sa_aligned<V>(pointer). Uses SA_FN.
std::string dtype_helpers(const std::string& device);

/// sa_index(x, div, mod) = (x / div) % mod for x, div, mod >= 0, in 32-bit arithmetic where
/// they fit (a position in one of an input's groups of dims), and sa_index32, its 32-bit
/// arithmetic. Uses SA_FN.
extern const char* const kIndexHelper;

/// CUDA host code: sa_grid(blocks), the grid of a launch of one block per unit of work.
extern const char* const kCudaGridHelper;

/// The helpers the expressions call (sa_max, sa_min: NaN-propagating like torch), written for a
/// backend whose function qualifier is the macro SA_FN.
extern const char* const kExpressionHelpers;

}  // namespace cuda_agent::synth
