/// Builders of cuda-agent.graph/1 documents for the synthesizer's tests: the inputs, nodes and
/// outputs harness/capture.py would write, small enough to read in a test.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "synth/graph.h"

namespace cuda_agent::synth::testing {

using nlohmann::json;

/// An input, parameter or buffer (kind), float32 unless the test changes it.
inline json tensor_input(const std::string& name, const std::string& kind, json shape,
                         const std::string& target = "") {
  return {
      {"name", name}, {"kind", kind}, {"target", target}, {"shape", shape}, {"dtype", "float32"}};
}

/// An op node; shape and dtype are lists for an op that makes several tensors.
inline json node(const std::string& name, const std::string& op, json args, json shape,
                 json dtype = "float32") {
  return {{"name", name},   {"op", op},      {"args", args}, {"kwargs", json::object()},
          {"shape", shape}, {"dtype", dtype}};
}

/// An argument naming a value.
inline json ref(const std::string& name) {
  json r = json::object();
  r["ref"] = name;
  return r;
}

inline json graph(json inputs, json nodes, json outputs) {
  return {
      {"schema", "cuda-agent.graph/1"}, {"inputs", inputs}, {"nodes", nodes}, {"outputs", outputs}};
}

/// The graph of doc, which the test expects to read.
inline Graph read(const json& doc) {
  Graph g;
  Status s = read_graph(doc, &g);
  EXPECT_TRUE(s.ok()) << s.message();
  return g;
}

}  // namespace cuda_agent::synth::testing
