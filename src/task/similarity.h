/// How alike two tasks' computations are, from their graph IRs (harness/capture.py): the
/// structural similarity `tasks check` drops near-copies of a reference set by (a synthesized
/// task that is a KernelBench test at other sizes teaches nothing and leaks the test).
///
/// A graph's signature is the multiset of Weisfeiler-Lehman labels of its values: an input's
/// kind (input, parameter, buffer, constant), an op's name, then, round by round, each op's label
/// combined with its arguments' labels in order. Sizes and constants do not enter it, so the same
/// computation at other sizes is identical; similarity is the weighted Jaccard index of two
/// signatures, 1 for the same structure and near 0 for unrelated ones.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>

namespace cuda_agent {

struct GraphSignature {
  std::map<std::uint64_t, int> labels;  // label -> how many values carry it
  bool empty() const { return labels.empty(); }
};

/// The signature of a cuda-agent.graph/1 document; empty for anything else.
GraphSignature graph_signature(const nlohmann::json& graph, int rounds = 2);

/// Weighted Jaccard index in [0, 1]; 0 when either is empty.
double graph_similarity(const GraphSignature& a, const GraphSignature& b);

}  // namespace cuda_agent
