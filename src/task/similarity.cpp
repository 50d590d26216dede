#include "task/similarity.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "util/graph_ir.h"

namespace cuda_agent {
namespace {

constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t mix(std::uint64_t h, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    h = (h ^ ((value >> (8 * i)) & 0xff)) * kFnvPrime;
  }
  return h;
}

std::uint64_t hash_text(const std::string& text) {
  std::uint64_t h = kFnvOffset;
  for (unsigned char c : text) h = (h ^ c) * kFnvPrime;
  return h;
}

}  // namespace

GraphSignature graph_signature(const nlohmann::json& graph, int rounds) {
  GraphSignature signature;
  if (!graph.is_object() || !graph.contains("nodes") || !graph["nodes"].is_array()) {
    return signature;
  }
  std::unordered_map<std::string, std::uint64_t> label;
  if (graph.contains("inputs") && graph["inputs"].is_array()) {
    for (const auto& input : graph["inputs"]) {
      label[input.value("name", "")] = hash_text("input:" + input.value("kind", "input"));
    }
  }
  struct Op {
    std::string name;
    std::uint64_t base;
    std::vector<std::string> args;
  };
  std::vector<Op> ops;
  for (const auto& node : graph["nodes"]) {
    Op op{node.value("name", ""), hash_text("op:" + op_base_name(node.value("op", ""))), {}};
    if (node.contains("args")) collect_value_refs(node["args"], &op.args);
    if (node.contains("kwargs")) collect_value_refs(node["kwargs"], &op.args);
    label[op.name] = op.base;
    ops.push_back(std::move(op));
  }
  for (const auto& [name, value] : label) signature.labels[value]++;
  for (int round = 0; round < rounds; ++round) {
    std::unordered_map<std::string, std::uint64_t> next = label;
    for (const Op& op : ops) {
      std::uint64_t h = mix(op.base, static_cast<std::uint64_t>(round + 1));
      for (const std::string& arg : op.args) {
        auto found = label.find(arg);
        h = mix(h, found == label.end() ? 0 : found->second);
      }
      next[op.name] = h;
      signature.labels[h]++;
    }
    label = std::move(next);
  }
  return signature;
}

double graph_similarity(const GraphSignature& a, const GraphSignature& b) {
  if (a.empty() || b.empty()) return 0;
  long long shared = 0, total = 0;
  auto i = a.labels.begin();
  auto j = b.labels.begin();
  while (i != a.labels.end() || j != b.labels.end()) {
    if (j == b.labels.end() || (i != a.labels.end() && i->first < j->first)) {
      total += i++->second;
    } else if (i == a.labels.end() || j->first < i->first) {
      total += j++->second;
    } else {
      shared += std::min(i->second, j->second);
      total += std::max(i->second, j->second);
      ++i;
      ++j;
    }
  }
  return total == 0 ? 0 : static_cast<double>(shared) / static_cast<double>(total);
}

}  // namespace cuda_agent
