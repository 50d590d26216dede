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

/// The helpers the expressions call (sa_max, sa_min: NaN-propagating like torch), written for a
/// backend whose function qualifier is the macro SA_FN.
extern const char* const kExpressionHelpers;

}  // namespace cuda_agent::synth
