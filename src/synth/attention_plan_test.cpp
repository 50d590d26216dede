#include "synth/attention_plan.h"

#include <gtest/gtest.h>

#include <optional>

#include "synth/graph_test_util.h"
#include "synth/pipeline.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

struct Sizes {
  json batch;  // the dims before a sequence's: (batch, heads), (batch,) or ()
  int lq, lk, d, dv;
  std::string dtype = "float16";
  bool mask = true;  // a bool (lq, lk) buffer fills the scaled scores with -inf
  int softmax_dim = -1;
  bool return_scores = false;  // the scores are an output too
};

json shape(const json& batch, std::initializer_list<int> last) {
  json s = batch;
  for (int k : last) s.push_back(k);
  return s;
}

/// softmax(masked_fill(Q @ K^T * 0.125, mask, -inf)) @ V, K transposed by a view.
json attention(const Sizes& z) {
  json q = tensor_input("q", "input", shape(z.batch, {z.lq, z.d}));
  json k = tensor_input("k", "input", shape(z.batch, {z.lk, z.d}));
  json v = tensor_input("v", "input", shape(z.batch, {z.lk, z.dv}));
  json mask = tensor_input("b_mask", "buffer", {z.lq, z.lk}, "mask");
  for (json* t : {&q, &k, &v}) (*t)["dtype"] = z.dtype;
  mask["dtype"] = "bool";
  const json scores = shape(z.batch, {z.lq, z.lk});
  json nodes = {
      node("transpose", "aten.transpose.int", json::array({ref("k"), -2, -1}),
           shape(z.batch, {z.d, z.lk}), z.dtype),
      node("matmul", "aten.matmul.default", json::array({ref("q"), ref("transpose")}), scores,
           z.dtype),
      node("mul", "aten.mul.Tensor", json::array({ref("matmul"), 0.125}), scores, z.dtype)};
  std::string last = "mul";
  if (z.mask) {
    nodes.push_back(node("masked_fill", "aten.masked_fill.Scalar",
                         json::array({ref("mul"), ref("b_mask"), "-inf"}), scores, z.dtype));
    last = "masked_fill";
  }
  nodes.push_back(node("softmax", "aten.softmax.int",
                       json::array({testing::ref(last), z.softmax_dim}), scores, z.dtype));
  nodes.push_back(node("matmul_1", "aten.matmul.default", json::array({ref("softmax"), ref("v")}),
                       shape(z.batch, {z.lq, z.dv}), z.dtype));
  json outputs = {"matmul_1"};
  if (z.return_scores) outputs.push_back("matmul");
  return graph({q, k, v, mask}, nodes, outputs);
}

const PipelineStep* attention_step(const std::vector<PipelineStep>& steps) {
  for (const PipelineStep& step : steps) {
    if (step.kind == PipelineStep::Kind::kAttention) return &step;
  }
  return nullptr;
}

/// The graph of the attention step plan_pipeline cuts from g; none where it cuts none.
std::optional<Graph> attention_step_graph(const Graph& g) {
  std::vector<PipelineStep> steps;
  if (!plan_pipeline(g, &steps).ok()) return std::nullopt;
  const PipelineStep* step = attention_step(steps);
  if (step == nullptr) return std::nullopt;
  return step_graph(g, *step);
}

TEST(Attention, BothGemmsTheScalingTheMaskAndTheSoftmaxAreOneStep) {
  Graph g = read(attention({{2, 3}, 40, 50, 32, 16}));
  std::vector<PipelineStep> steps;
  ASSERT_TRUE(plan_pipeline(g, &steps).ok());
  ASSERT_EQ(steps.size(), 2u);  // the transpose's view, then the attention
  EXPECT_EQ(steps[0].kind, PipelineStep::Kind::kView);
  const PipelineStep* step = attention_step(steps);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->ops.size(), 5u);
  // Q, K^T as the GEMM reads it (in place: no copy), the mask f reads, V: in first use.
  EXPECT_EQ(step->reads,
            (std::vector<int>{g.find("q"), g.find("transpose"), g.find("b_mask"), g.find("v")}));
  EXPECT_TRUE(step->copied.empty());
  EXPECT_EQ(step->outputs, std::vector<int>{g.find("matmul_1")});

  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(step_graph(g, *step), &plan).ok());
  EXPECT_EQ(plan.head_dim, 32);
  EXPECT_EQ(plan.value_dim, 16);
  EXPECT_EQ(plan.batch_rank, 2);
  ASSERT_EQ(plan.inputs.size(), 1u);
  EXPECT_EQ(plan.inputs[0].dtype, "bool");
  EXPECT_EQ(plan.lines.size(), 2u);  // the scaling, then the fill
  EXPECT_EQ(plan.ops,
            (std::vector<std::string>{"matmul", "mul", "masked_fill", "softmax", "matmul"}));
  // f ends in a fill by -inf: the kernel skips the steps the mask hides from a whole block.
  EXPECT_EQ(plan.mask, 0);
  EXPECT_NE(attention_kernel_source(plan, "cuda").find("#define SA_MASK 1"), std::string::npos);
}

TEST(Attention, OnlyAFinalFillByMinusInfinityHidesKeys) {
  // Filled with a number: the scores are not -inf, the keys not hidden.
  json doc = attention({{2, 3}, 40, 50, 32, 16});
  for (json& node : doc["nodes"]) {
    if (node["name"] == "masked_fill") node["args"][2] = -10000.0;
  }
  for (const json& d : {doc, attention({{2, 3}, 40, 50, 32, 16, "float16", false})}) {
    const std::optional<Graph> step = attention_step_graph(read(d));
    ASSERT_TRUE(step.has_value());
    AttentionPlan plan;
    ASSERT_TRUE(plan_attention(*step, &plan).ok());
    EXPECT_EQ(plan.mask, -1);
    EXPECT_NE(attention_kernel_source(plan, "cuda").find("#define SA_MASK 0"), std::string::npos);
  }
}

TEST(Attention, TheCandidateCallsOneAttentionKernelOnEachDevice) {
  for (const std::string device : {"cpu", "cuda"}) {
    Candidate c;
    Status s = synthesize_pipeline(read(attention({{2, 3}, 40, 50, 32, 16})), device, &c);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::string source =
        c.files["kernels/fused_attention_k0" + std::string(device == "cuda" ? ".cu" : ".cpp")];
    ASSERT_FALSE(source.empty());
    EXPECT_NE(source.find("int fused_attention_k0("), std::string::npos);
    EXPECT_NE(source.find("#define SA_D 32\n"), std::string::npos);
    EXPECT_NE(source.find("#define SA_DV 16\n"), std::string::npos);
    EXPECT_NE(source.find("p_in0["), std::string::npos);  // the mask, read at each score
    EXPECT_EQ(source.find("mma.sync") != std::string::npos, device == "cuda");
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("v_matmul_1 = self._kernels[0](q, v_transpose, self.mask, v)"),
              std::string::npos)
        << model;
    // The kernel's own module takes them in that order and passes Q, K^T and V first.
    const std::string& module = c.files["synth_kernel0.py"];
    EXPECT_NE(module.find("def forward(self, q, transpose, b_mask, v):"), std::string::npos)
        << module;
    EXPECT_NE(module.find("inputs = [q, transpose, v, b_mask, ]"), std::string::npos) << module;
    EXPECT_EQ(model.find("torch.matmul"), std::string::npos) << model;
    EXPECT_NE(c.files["synth_kernel0.py"].find("lib.bind(\"fused_attention_k0\""),
              std::string::npos);
    // Its fallback: both GEMMs in the library, the scaling, the fill and the softmax one row
    // kernel.
    ASSERT_EQ(c.fallbacks.size(), 1u);
    const Candidate& plainer = c.fallbacks[0];
    EXPECT_FALSE(plainer.summary.empty());
    EXPECT_TRUE(plainer.fallbacks.empty());
    EXPECT_TRUE(plainer.files.count("kernels/fused_rows_k0" +
                                    std::string(device == "cuda" ? ".cu" : ".cpp")));
    const std::string& library = plainer.files.at("model_new.py");
    EXPECT_NE(library.find("torch.matmul(v_softmax, v)"), std::string::npos) << library;
  }
}

TEST(Attention, ItStillFiresOnOtherShapesAndBfloat16) {
  for (const Sizes& z : {Sizes{{5}, 7, 130, 64, 64, "bfloat16"},
                         Sizes{json::array(), 33, 9, 128, 48, "float16", false}}) {
    Graph g = read(attention(z));
    const std::optional<Graph> step = attention_step_graph(g);
    ASSERT_TRUE(step.has_value()) << z.d;
    AttentionPlan plan;
    ASSERT_TRUE(plan_attention(*step, &plan).ok());
    EXPECT_EQ(plan.head_dim, z.d);
    EXPECT_EQ(plan.dtype, z.dtype);
    EXPECT_EQ(plan.batch_rank, static_cast<int>(z.batch.size()));
    EXPECT_EQ(plan.inputs.size(), z.mask ? 1u : 0u);
    Candidate c;
    ASSERT_TRUE(synthesize_pipeline(g, "cuda", &c).ok());
    EXPECT_NE(c.files["kernels/fused_attention_k0.cu"].find(z.dtype == "bfloat16" ? "\"bf16.bf16\""
                                                                                  : "\"f16.f16\""),
              std::string::npos);
  }
}

TEST(Attention, PastHeadDimsOf64TheKernelTakesOneTileAWarpAndTheTunerIsOfferedNoOther) {
  // Two m-tiles a warp keep twice the scores and outputs in registers, which spill at 128.
  for (const Sizes& z : {Sizes{{2, 3}, 40, 50, 64, 64}, Sizes{{2, 3}, 40, 50, 128, 128},
                         Sizes{{2, 3}, 40, 50, 64, 96}}) {
    const std::optional<Graph> step = attention_step_graph(read(attention(z)));
    ASSERT_TRUE(step.has_value()) << z.d;
    Candidate c;
    const Status s = synthesize_attention(*step, "cuda", &c);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<int> ids;
    for (const auto& config : c.configs) ids.push_back(config.id);
    const bool two = z.d <= 64 && z.dv <= 64;
    EXPECT_EQ(ids, two ? std::vector<int>({-1, 1, 2}) : std::vector<int>({-1})) << z.d;
    const std::string& source = c.files.at("kernels/fused_attention.cu");
    EXPECT_NE(source.find("#if SA_MT == 2"), std::string::npos);
    EXPECT_NE(source.find("#define SA_D " + std::to_string(z.d) + "\n"), std::string::npos);
  }
}

/// The reason plan_attention gives for the attention of z's step, "" where it takes it.
std::string refusal(const Sizes& z) {
  Graph g = read(attention(z));
  PipelineStep step;
  step.kind = PipelineStep::Kind::kAttention;
  for (std::size_t k = 1; k < g.ops.size(); ++k) step.ops.push_back(static_cast<int>(k));
  step.reads = {g.find("q"), g.find("transpose"), g.find("v"), g.find("b_mask")};
  step.outputs = {g.find("matmul_1")};
  AttentionPlan plan;
  Status s = plan_attention(step_graph(g, step), &plan);
  return s.ok() ? "" : s.message();
}

TEST(Attention, WhatTheKernelCannotTakeRunsAsTheLibrarysGemmsAndARowKernel) {
  const Sizes fp32{{2, 3}, 40, 50, 32, 16, "float32"};
  const Sizes odd_head{{2, 3}, 40, 50, 24, 16};
  const Sizes wide_head{{2, 3}, 40, 50, 256, 16};
  const Sizes other_dim{{2, 3}, 40, 40, 32, 16, "float16", true, -2};
  const Sizes returned{{2, 3}, 40, 50, 32, 16, "float16", true, -1, true};
  const Sizes three_batch_dims{{2, 3, 2}, 40, 50, 32, 16};
  EXPECT_NE(refusal(fp32).find("float32"), std::string::npos) << refusal(fp32);
  EXPECT_NE(refusal(odd_head).find("head dim of 24"), std::string::npos);
  EXPECT_NE(refusal(wide_head).find("head dim of 256"), std::string::npos);
  EXPECT_NE(refusal(three_batch_dims).find("batch dims"), std::string::npos);
  for (const Sizes& z : {fp32, odd_head, wide_head, other_dim, returned, three_batch_dims}) {
    Graph g = read(attention(z));
    std::vector<PipelineStep> steps;
    Status s = plan_pipeline(g, &steps);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(attention_step(steps), nullptr) << z.d;
    int library = 0;
    for (const PipelineStep& step : steps) library += step.kind == PipelineStep::Kind::kLibrary;
    EXPECT_EQ(library, 2) << z.d;  // both GEMMs, as before
  }
}

TEST(Attention, TheMatchFollowsOnlyElementwiseOpsOfTheScoresReadByNothingElse) {
  Graph g = read(attention({{2, 3}, 40, 50, 32, 16}));
  AttentionOps ops;
  std::string why;
  ASSERT_TRUE(match_attention(g, g.values[g.find("softmax")].op, &ops, &why)) << why;
  EXPECT_EQ(ops.all(), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_FALSE(match_attention(g, g.values[g.find("mul")].op, &ops, &why));

  Graph returned = read(attention({{2, 3}, 40, 50, 32, 16, "float16", true, -1, true}));
  EXPECT_FALSE(match_attention(returned, returned.values[returned.find("softmax")].op, &ops, &why));
  EXPECT_NE(why.find("matmul is read by more than the attention"), std::string::npos) << why;
}

}  // namespace
}  // namespace cuda_agent::synth
