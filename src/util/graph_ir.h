/// What every reader of the graph IR (harness/capture.py, schema cuda-agent.graph/1) needs:
/// the dataset filters' structural similarity (task/similarity.h) and the synthesizer
/// (synth/graph.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cuda_agent {

inline constexpr const char* kGraphIrSchema = "cuda-agent.graph/1";

/// "aten.linear.default" -> "linear", "operator.getitem" -> "getitem": what an op does, without
/// the overload that says how it was called.
std::string op_base_name(const std::string& target);

/// The names of the values an op's arguments refer to ({"ref": name}), depth first, in order.
void collect_value_refs(const nlohmann::json& arguments, std::vector<std::string>* refs);

}  // namespace cuda_agent
