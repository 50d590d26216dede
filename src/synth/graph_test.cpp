#include "synth/graph.h"

#include <gtest/gtest.h>

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

// As harness/capture.py writes them (tests/tasks/filters/keep_layer_norm_default_init.py and
// tasks/level1/013_max_dim.py).
const char* kLayerNorm = R"({"schema": "cuda-agent.graph/1",
  "inputs": [
    {"name": "p_norm_weight", "kind": "parameter", "target": "norm.weight", "shape": [64],
     "dtype": "float32", "stride": [1]},
    {"name": "p_norm_bias", "kind": "parameter", "target": "norm.bias", "shape": [64],
     "dtype": "float32", "stride": [1]},
    {"name": "x", "kind": "input", "target": null, "shape": [128, 64], "dtype": "float32",
     "stride": [64, 1]}],
  "nodes": [
    {"name": "layer_norm", "op": "aten.layer_norm.default",
     "args": [{"ref": "x"}, [64], {"ref": "p_norm_weight"}, {"ref": "p_norm_bias"}, 1e-05, false],
     "kwargs": {}, "shape": [128, 64], "dtype": "float32", "stride": [64, 1]}],
  "outputs": ["layer_norm"], "traced_on": "meta"})";

const char* kMaxDim = R"({"schema": "cuda-agent.graph/1",
  "inputs": [{"name": "x", "kind": "input", "target": null, "shape": [196608, 4096],
              "dtype": "float32", "stride": [4096, 1]}],
  "nodes": [
    {"name": "max_1", "op": "aten.max.dim", "args": [{"ref": "x"}, -1], "kwargs": {},
     "shape": [[196608], [196608]], "dtype": ["float32", "int64"], "stride": [[1], [1]]},
    {"name": "getitem", "op": "operator.getitem", "args": [{"ref": "max_1"}, 0], "kwargs": {},
     "shape": [196608], "dtype": "float32", "stride": [1]},
    {"name": "getitem_1", "op": "operator.getitem", "args": [{"ref": "max_1"}, 1], "kwargs": {},
     "shape": [196608], "dtype": "int64", "stride": [1]}],
  "outputs": ["getitem", "getitem_1"], "traced_on": "meta"})";

TEST(SynthGraph, ReadsValuesOpsAndTheirTypes) {
  Graph g;
  ASSERT_TRUE(read_graph(json::parse(kLayerNorm), &g).ok());
  ASSERT_EQ(g.values.size(), 4u);
  EXPECT_EQ(g.values[0].kind, "parameter");
  EXPECT_EQ(g.values[0].target, "norm.weight");
  EXPECT_EQ(g.values[2].kind, "input");
  EXPECT_EQ(g.values[2].results[0].shape, (std::vector<std::int64_t>{128, 64}));
  EXPECT_EQ(g.values[2].results[0].stride, (std::vector<std::int64_t>{64, 1}));
  ASSERT_EQ(g.ops.size(), 1u);
  const Op& norm = g.ops[0];
  EXPECT_EQ(norm.name, "layer_norm");
  EXPECT_EQ(norm.op_class, OpClass::kNormalization);
  EXPECT_EQ(norm.inputs, (std::vector<int>{2, 0, 1}));  // x, weight, bias: argument order
  EXPECT_EQ(g.values[norm.value].op, 0);
  EXPECT_EQ(g.outputs, (std::vector<int>{3}));
  EXPECT_EQ(g.find("x"), 2);
  EXPECT_EQ(g.find("nope"), -1);
  EXPECT_TRUE(g.unsupported_ops().empty());
}

TEST(SynthGraph, ANodeWithSeveralResultsHasATypePerResult) {
  Graph g;
  ASSERT_TRUE(read_graph(json::parse(kMaxDim), &g).ok());
  const Value& both = g.values[g.find("max_1")];
  ASSERT_EQ(both.results.size(), 2u);
  EXPECT_EQ(both.results[0].dtype, "float32");
  EXPECT_EQ(both.results[1].dtype, "int64");
  EXPECT_EQ(g.ops[0].op_class, OpClass::kReduction);
  EXPECT_EQ(g.ops[1].name, "getitem");
  EXPECT_EQ(g.ops[1].op_class, OpClass::kLayout);
  EXPECT_EQ(g.outputs.size(), 2u);
}

TEST(SynthGraph, OpsWithoutAPlanAreNamedNotGuessed) {
  json doc = json::parse(kLayerNorm);
  doc["nodes"].push_back({{"name", "fft"},
                          {"op", "aten.fft_fft.default"},
                          {"args", {{{"ref", "layer_norm"}}}},
                          {"shape", {128, 64}},
                          {"dtype", "complex64"}});
  doc["nodes"].push_back({{"name", "fft2"},
                          {"op", "aten.fft_fft.default"},
                          {"args", {{{"ref", "fft"}}}},
                          {"shape", {128, 64}},
                          {"dtype", "complex64"}});
  Graph g;
  ASSERT_TRUE(read_graph(doc, &g).ok());
  EXPECT_EQ(g.unsupported_ops(), std::vector<std::string>{"aten.fft_fft.default"});
}

TEST(SynthGraph, MalformedDocumentsSayWhatIsWrong) {
  Graph g;
  Status s = read_graph(json{{"schema", "other/1"}}, &g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cuda-agent.graph/1"), std::string::npos);

  json dangling = json::parse(kLayerNorm);
  dangling["nodes"][0]["args"][0] = {{"ref", "y"}};
  s = read_graph(dangling, &g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("uses y"), std::string::npos) << s.message();

  json twice = json::parse(kLayerNorm);
  twice["nodes"][0]["name"] = "x";
  s = read_graph(twice, &g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("two values x"), std::string::npos) << s.message();

  json no_output = json::parse(kLayerNorm);
  no_output["outputs"] = {"gone"};
  EXPECT_FALSE(read_graph(no_output, &g).ok());
}

TEST(SynthGraph, ClassesFollowWhatTheOpDoes) {
  EXPECT_EQ(op_base_name("aten.sum.dim_IntList"), "sum");
  EXPECT_EQ(op_base_name("aten.add.Tensor"), "add");
  EXPECT_EQ(op_base_name("operator.getitem"), "getitem");
  EXPECT_EQ(classify_op("relu"), OpClass::kElementwise);
  EXPECT_EQ(classify_op("rsub"), OpClass::kElementwise);
  EXPECT_EQ(classify_op("logsumexp"), OpClass::kReduction);
  EXPECT_EQ(classify_op("log_softmax"), OpClass::kSoftmax);
  EXPECT_EQ(classify_op("rms_norm"), OpClass::kNormalization);
  EXPECT_EQ(classify_op("linear"), OpClass::kGemm);
  EXPECT_EQ(classify_op("conv_transpose2d"), OpClass::kConvolution);
  EXPECT_EQ(classify_op("adaptive_avg_pool2d"), OpClass::kPooling);
  EXPECT_EQ(classify_op("t"), OpClass::kLayout);
  EXPECT_EQ(classify_op("cross_entropy_loss"), OpClass::kUnsupported);
  EXPECT_STREQ(op_class_name(OpClass::kGemm), "gemm");
}

}  // namespace
}  // namespace cuda_agent::synth
