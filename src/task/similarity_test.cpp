#include "task/similarity.h"

#include <gtest/gtest.h>

namespace cuda_agent {
namespace {

using nlohmann::json;

json input(const std::string& name, const std::string& kind, std::vector<int> shape) {
  return {{"name", name}, {"kind", kind}, {"shape", shape}, {"dtype", "float32"}};
}

json node(const std::string& name, const std::string& op, json args, std::vector<int> shape) {
  return {{"name", name},   {"op", op},          {"args", args}, {"kwargs", json::object()},
          {"shape", shape}, {"dtype", "float32"}};
}

json ref(const std::string& name) { return {{"ref", name}}; }

/// linear -> relu -> scale, at the given sizes.
json linear_relu(int rows, int features) {
  return {{"schema", "cuda-agent.graph/1"},
          {"inputs",
           {input("w", "parameter", {features, features}), input("b", "parameter", {features}),
            input("x", "input", {rows, features})}},
          {"nodes",
           {node("linear", "aten.linear.default", {ref("x"), ref("w"), ref("b")}, {rows, features}),
            node("relu", "aten.relu.default", {ref("linear")}, {rows, features}),
            node("mul", "aten.mul.Tensor", {ref("relu"), 2.0}, {rows, features})}},
          {"outputs", {"mul"}}};
}

TEST(Similarity, TheSameComputationAtOtherSizesIsIdentical) {
  auto a = graph_signature(linear_relu(128, 64));
  auto b = graph_signature(linear_relu(4096, 1024));
  EXPECT_DOUBLE_EQ(graph_similarity(a, b), 1.0);
}

TEST(Similarity, ADifferentActivationIsPartlyAlike) {
  json other = linear_relu(128, 64);
  other["nodes"][1]["op"] = "aten.gelu.default";
  double score = graph_similarity(graph_signature(linear_relu(128, 64)), graph_signature(other));
  EXPECT_GT(score, 0.2);
  EXPECT_LT(score, 0.9);
}

TEST(Similarity, UnrelatedGraphsScoreLow) {
  json pool = {{"schema", "cuda-agent.graph/1"},
               {"inputs", {input("x", "input", {8, 3, 32, 32})}},
               {"nodes",
                {node("pool", "aten.max_pool2d.default", {ref("x"), {2, 2}}, {8, 3, 16, 16}),
                 node("sig", "aten.sigmoid.default", {ref("pool")}, {8, 3, 16, 16})}},
               {"outputs", {"sig"}}};
  EXPECT_LT(graph_similarity(graph_signature(linear_relu(128, 64)), graph_signature(pool)), 0.2);
}

TEST(Similarity, ArgumentOrderMatters) {
  auto graph = [](bool swapped) {
    json args = swapped ? json{ref("y"), ref("x")} : json{ref("x"), ref("y")};
    return json{{"inputs", {input("x", "input", {4}), input("y", "parameter", {4})}},
                {"nodes", {node("sub", "aten.sub.Tensor", args, {4})}},
                {"outputs", {"sub"}}};
  };
  EXPECT_LT(graph_similarity(graph_signature(graph(false)), graph_signature(graph(true))), 1.0);
}

TEST(Similarity, ExtendingAChainKeepsMostOfIt) {
  json longer = linear_relu(128, 64);
  longer["nodes"].push_back(node("tanh", "aten.tanh.default", {ref("mul")}, {128, 64}));
  double score = graph_similarity(graph_signature(linear_relu(128, 64)), graph_signature(longer));
  EXPECT_GT(score, 0.6);
  EXPECT_LT(score, 1.0);
}

TEST(Similarity, AnythingButAGraphHasNoSignature) {
  EXPECT_TRUE(graph_signature(json::object()).empty());
  EXPECT_TRUE(graph_signature(json("text")).empty());
  EXPECT_EQ(graph_similarity(graph_signature(json::object()), graph_signature(linear_relu(2, 2))),
            0.0);
}

}  // namespace
}  // namespace cuda_agent
