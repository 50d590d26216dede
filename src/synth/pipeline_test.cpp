#include "synth/pipeline.h"

#include <gtest/gtest.h>

#include "synth/graph_test_util.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// An MLP block: layer_norm(x + fc2(gelu(fc1(x)))) over (batch, tokens, width), hidden 4 x.
json mlp_block(int batch, int tokens, int width) {
  const int hidden = 4 * width;
  return graph(
      {tensor_input("p_fc1_weight", "parameter", {hidden, width}, "fc1.weight"),
       tensor_input("p_fc1_bias", "parameter", {hidden}, "fc1.bias"),
       tensor_input("p_fc2_weight", "parameter", {width, hidden}, "fc2.weight"),
       tensor_input("p_fc2_bias", "parameter", {width}, "fc2.bias"),
       tensor_input("p_norm_weight", "parameter", {width}, "norm.weight"),
       tensor_input("p_norm_bias", "parameter", {width}, "norm.bias"),
       tensor_input("x", "input", {batch, tokens, width})},
      {node("linear", "aten.linear.default", {ref("x"), ref("p_fc1_weight"), ref("p_fc1_bias")},
            {batch, tokens, hidden}),
       node("gelu", "aten.gelu.default", {ref("linear")}, {batch, tokens, hidden}),
       node("linear_1", "aten.linear.default",
            {ref("gelu"), ref("p_fc2_weight"), ref("p_fc2_bias")}, {batch, tokens, width}),
       node("add", "aten.add.Tensor", {ref("linear_1"), ref("x")}, {batch, tokens, width}),
       node("layer_norm", "aten.layer_norm.default",
            {ref("add"), json::array({width}), ref("p_norm_weight"), ref("p_norm_bias"), 1e-5},
            {batch, tokens, width})},
      {"layer_norm"});
}

TEST(Pipeline, LibraryStepsSplitTheGraphIntoFusedRuns) {
  Graph g = read(mlp_block(2, 64, 32));
  std::vector<PipelineStep> steps;
  ASSERT_TRUE(plan_pipeline(g, &steps).ok());
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].kind, PipelineStep::Kind::kLibrary);
  EXPECT_EQ(steps[1].kind, PipelineStep::Kind::kKernel);
  EXPECT_EQ(steps[2].kind, PipelineStep::Kind::kLibrary);
  EXPECT_EQ(steps[3].kind, PipelineStep::Kind::kKernel);
  // The second run reads the GEMM's result, the residual and the norm's weights, and makes
  // the task's output; the first makes gelu, which the next GEMM reads.
  std::vector<int> reads = {g.find("linear_1"), g.find("x"), g.find("p_norm_weight"),
                            g.find("p_norm_bias")};
  EXPECT_EQ(steps[3].reads, reads);
  EXPECT_EQ(steps[3].outputs, std::vector<int>{g.find("layer_norm")});
  EXPECT_EQ(steps[1].outputs, std::vector<int>{g.find("gelu")});

  Graph run = step_graph(g, steps[3]);
  EXPECT_EQ(run.ops.size(), 2u);
  EXPECT_EQ(run.values[0].name, "linear_1");
  EXPECT_EQ(run.values[0].kind, "input");
  ASSERT_EQ(run.outputs.size(), 1u);
  EXPECT_EQ(run.values[run.outputs[0]].name, "layer_norm");
}

TEST(Pipeline, TheCandidateCallsTheLibraryAndOneEntryPerKernel) {
  for (const std::string device : {"cpu", "cuda"}) {
    Candidate c;
    Status s = synthesize_pipeline(read(mlp_block(2, 64, 32)), device, &c);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::string ext = device == "cuda" ? ".cu" : ".cpp";
    ASSERT_TRUE(c.files.count("kernels/fused_elementwise_k0" + ext));
    ASSERT_TRUE(c.files.count("kernels/fused_rows_k1" + ext));
    ASSERT_TRUE(c.files.count("synth_kernel0.py"));
    ASSERT_TRUE(c.files.count("synth_kernel1.py"));
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("v_linear = F.linear(x, self.fc1.weight, self.fc1.bias)"),
              std::string::npos)
        << model;
    EXPECT_NE(model.find("v_gelu = self._kernels[0](v_linear)"), std::string::npos) << model;
    EXPECT_NE(model.find("v_layer_norm = self._kernels[1](v_linear_1, x, self.norm.weight, "
                         "self.norm.bias)"),
              std::string::npos)
        << model;
    EXPECT_NE(model.find("self.fc2.weight = nn.Parameter("), std::string::npos) << model;
    EXPECT_NE(model.find("return v_layer_norm"), std::string::npos) << model;
    // Each kernel's entries carry its step's suffix, in the source and in its module alike.
    const std::string& rows = c.files["kernels/fused_rows_k1" + ext];
    EXPECT_NE(rows.find("int fused_rows_k1("), std::string::npos);
    EXPECT_NE(rows.find("int fused_rows_k1_config("), std::string::npos);
    EXPECT_EQ(rows.find("int fused_rows("), std::string::npos);
    EXPECT_NE(c.files["synth_kernel1.py"].find("lib.bind(\"fused_rows_k1\""), std::string::npos);
    EXPECT_NE(c.files["synth_kernel0.py"].find("lib.bind(\"fused_elementwise_k0\""),
              std::string::npos);
    EXPECT_EQ(c.configs.size(), 1u);
    EXPECT_TRUE(c.fallbacks.empty());  // no attention: nothing plainer to turn to
  }
}

TEST(Pipeline, ItStillFiresOnAnotherShape) {
  Candidate c;
  Status s = synthesize_pipeline(read(mlp_block(3, 17, 48)), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.files.count("kernels/fused_rows_k1.cpp"));
}

/// a * sigmoid(b) of the halves a and b of linear(x) (a GLU over a GEMM's result); `also` names
/// another reader of a, if any: "output" (the task returns a too) or "linear" (a GEMM reads it).
json gated_halves(int rows, int half, const std::string& also) {
  json chunk = node("chunk", "aten.chunk.default", {ref("linear"), 2, -1},
                    json::array({{rows, half}, {rows, half}}), json::array({"float32", "float32"}));
  chunk["stride"] = json::array({{2 * half, 1}, {2 * half, 1}});
  json first = node("a", "operator.getitem", {ref("chunk"), 0}, {rows, half});
  json second = node("b", "operator.getitem", {ref("chunk"), 1}, {rows, half});
  first["stride"] = second["stride"] = {2 * half, 1};
  json nodes = {node("linear", "aten.linear.default", {ref("x"), ref("p_w")}, {rows, 2 * half}),
                chunk,
                first,
                second,
                node("sigmoid", "aten.sigmoid.default", {ref("b")}, {rows, half}),
                node("mul", "aten.mul.Tensor", {ref("a"), ref("sigmoid")}, {rows, half})};
  json outputs = {"mul"};
  if (also == "output") outputs.push_back("a");
  if (also == "linear") {
    nodes.push_back(node("linear_1", "aten.linear.default", {ref("a"), ref("p_v")}, {rows, 3}));
    outputs.push_back("linear_1");
  }
  return graph(
      {tensor_input("x", "input", {rows, 5}), tensor_input("p_w", "parameter", {2 * half, 5}, "w"),
       tensor_input("p_v", "parameter", {3, half}, "v")},
      nodes, outputs);
}

TEST(Pipeline, ASplitThatOnlyKernelsReadInPlaceMakesNoViews) {
  for (const std::string device : {"cpu", "cuda"}) {
    for (auto [rows, half] : {std::pair{4, 6}, std::pair{7, 33}}) {  // a perturbed shape too
      Candidate c;
      Status s = synthesize_pipeline(read(gated_halves(rows, half, "")), device, &c);
      ASSERT_TRUE(s.ok()) << s.message();
      const std::string& model = c.files["model_new.py"];
      EXPECT_NE(model.find("v_chunk = synth_piece.chunk(v_linear, 2, -1)"), std::string::npos)
          << model;
      EXPECT_NE(model.find("import synth_piece"), std::string::npos) << model;
      EXPECT_EQ(model.find("v_linear.chunk("), std::string::npos) << model;
      EXPECT_TRUE(c.files.count("synth_piece.py"));
    }
  }
  // A piece the task returns, or a GEMM reads, is a tensor: the split stays torch's view op.
  for (const std::string also : {"output", "linear"}) {
    Candidate c;
    Status s = synthesize_pipeline(read(gated_halves(4, 6, also)), "cpu", &c);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("v_chunk = v_linear.chunk(2, -1)"), std::string::npos) << also << model;
    EXPECT_EQ(model.find("synth_piece"), std::string::npos) << also << model;
    EXPECT_FALSE(c.files.count("synth_piece.py"));
  }
}

TEST(Pipeline, ConvolutionsAndViewsAreStepsOfTheirOwn) {
  // conv2d -> flatten -> relu: the flatten is a view, the relu the kernel.
  json doc = graph({tensor_input("p_w", "parameter", {8, 3, 3, 3}, "conv.weight"),
                    tensor_input("x", "input", {2, 3, 16, 16})},
                   {node("conv2d", "aten.conv2d.default",
                         {ref("x"), ref("p_w"), nullptr, json::array({1, 1}), json::array({1, 1}),
                          json::array({1, 1}), 1},
                         {2, 8, 16, 16}),
                    node("flatten", "aten.flatten.using_ints", {ref("conv2d"), 1, -1}, {2, 2048}),
                    node("relu", "aten.relu.default", {ref("flatten")}, {2, 2048})},
                   {"relu"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_conv2d = F.conv2d(x, self.conv.weight, None, [1, 1], [1, 1], [1, 1], 1)"),
            std::string::npos)
      << model;
  EXPECT_NE(model.find("v_flatten = v_conv2d.flatten(1, -1)"), std::string::npos) << model;
  EXPECT_NE(model.find("v_relu = self._kernels[0](v_flatten)"), std::string::npos) << model;
}

TEST(Pipeline, ADepthwiseConvolutionRunsInTheWindowKernelAndTheNextInTheLibrary) {
  // depthwise conv2d (groups = 8, weight (8, 1, 3, 3)) -> pointwise conv2d -> relu.
  json doc = graph({tensor_input("x", "input", {2, 8, 16, 16}),
                    tensor_input("p_dw", "parameter", {8, 1, 3, 3}, "depthwise.weight"),
                    tensor_input("p_pw", "parameter", {16, 8, 1, 1}, "pointwise.weight")},
                   {node("dw", "aten.conv2d.default",
                         {ref("x"), ref("p_dw"), nullptr, json::array({1, 1}), json::array({1, 1}),
                          json::array({1, 1}), 8},
                         {2, 8, 16, 16}),
                    node("pw", "aten.conv2d.default", {ref("dw"), ref("p_pw")}, {2, 16, 16, 16}),
                    node("relu", "aten.relu.default", {ref("pw")}, {2, 16, 16, 16})},
                   {"relu"});
  for (const std::string device : {"cpu", "cuda"}) {
    Candidate c;
    Status s = synthesize_pipeline(read(doc), device, &c);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("v_dw = self._kernels[0](x, self.depthwise.weight)"), std::string::npos)
        << model;
    EXPECT_NE(model.find("F.conv2d(v_dw, self.pointwise.weight)"), std::string::npos) << model;
    EXPECT_TRUE(
        c.files.count(device == "cuda" ? "kernels/fused_pool_k0.cu" : "kernels/fused_pool_k0.cpp"));
  }
  // Two groups of four channels each is no depthwise convolution: the library's.
  doc["nodes"][0]["args"][6] = 2;
  doc["inputs"][1]["shape"] = json::array({8, 4, 3, 3});
  Candidate grouped;
  ASSERT_TRUE(synthesize_pipeline(read(doc), "cpu", &grouped).ok());
  EXPECT_NE(grouped.files["model_new.py"].find("F.conv2d(x, self.depthwise.weight"),
            std::string::npos)
      << grouped.files["model_new.py"];
}

TEST(Pipeline, WhatNoStepTakesIsNamed) {
  std::vector<PipelineStep> steps;
  // One fused run alone: the one-kernel plans are for that.
  json plain = graph({tensor_input("x", "input", {4, 8})},
                     {node("relu", "aten.relu.default", {ref("x")}, {4, 8})}, {"relu"});
  Status s = plan_pipeline(read(plain), &steps);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("one fused run"), std::string::npos) << s.message();

  // An op no plan knows has no step.
  json unknown =
      graph({tensor_input("p_w", "parameter", {8, 3, 3, 3}, "conv.weight"),
             tensor_input("x", "input", {2, 3, 16, 16})},
            {node("conv2d", "aten.conv2d.default", {ref("x"), ref("p_w")}, {2, 8, 16, 16}),
             node("cummax", "aten.cummax.default", {ref("conv2d"), 1}, {2, 8, 16, 16}),
             node("relu", "aten.relu.default", {ref("cummax")}, {2, 8, 16, 16})},
            {"relu"});
  s = plan_pipeline(read(unknown), &steps);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("aten.cummax.default (unsupported) fits no step"), std::string::npos)
      << s.message();

  // torch.matmul of two vectors is aten::dot, which the guard does not let through.
  json dot = graph({tensor_input("u", "input", {32}), tensor_input("v", "input", {32})},
                   {node("matmul", "aten.matmul.default", {ref("u"), ref("v")}, json::array()),
                    node("relu", "aten.relu.default", {ref("matmul")}, json::array())},
                   {"relu"});
  s = plan_pipeline(read(dot), &steps);
  EXPECT_NE(s.message().find("of two vectors runs as aten::dot"), std::string::npos) << s.message();
}

TEST(Pipeline, AMatrixTimesAVectorRunsAsAGemmOfOneColumn) {
  json doc = graph({tensor_input("a", "input", {16, 32}), tensor_input("v", "input", {32})},
                   {node("matmul", "aten.matmul.default", {ref("a"), ref("v")}, {16}),
                    node("relu", "aten.relu.default", {ref("matmul")}, {16})},
                   {"relu"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(c.files["model_new.py"].find("v_matmul = torch.matmul(a, v.unsqueeze(-1)).squeeze(-1)"),
            std::string::npos)
      << c.files["model_new.py"];
}

TEST(Pipeline, AStridedViewIsCopiedBeforeAKernelReadsItOrAReshapeReshapesIt) {
  // mm -> t (strided) -> relu: the kernel reads a contiguous copy of t.
  json doc = graph({tensor_input("a", "input", {16, 32}), tensor_input("b", "input", {32, 8})},
                   {node("mm", "aten.mm.default", {ref("a"), ref("b")}, {16, 8}),
                    node("t", "aten.t.default", {ref("mm")}, {8, 16}),
                    node("relu", "aten.relu.default", {ref("t")}, {8, 16})},
                   {"relu"});
  doc["nodes"][1]["stride"] = json::array({1, 8});
  for (const std::string device : {"cpu", "cuda"}) {
    Candidate c;
    Status s = synthesize_pipeline(read(doc), device, &c);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("c_t = synth_copy.contiguous(v_t)\n"
                         "        v_relu = self._kernels[0](c_t)"),
              std::string::npos)
        << model;
    EXPECT_TRUE(c.files.count("synth_copy.py"));
    EXPECT_TRUE(
        c.files.count(device == "cuda" ? "kernels/strided_copy.cu" : "kernels/strided_copy.cpp"));
  }
  // Contiguous, no copy.
  doc["nodes"][1]["stride"] = json::array({16, 1});
  Candidate plain;
  ASSERT_TRUE(synthesize_pipeline(read(doc), "cpu", &plain).ok());
  EXPECT_FALSE(plain.files.count("synth_copy.py"));
  EXPECT_EQ(plain.files["model_new.py"].find("synth_copy"), std::string::npos);

  // A reshape of the strided view reshapes its copy.
  json reshaped = graph({tensor_input("a", "input", {16, 32}), tensor_input("b", "input", {32, 8})},
                        {node("mm", "aten.mm.default", {ref("a"), ref("b")}, {16, 8}),
                         node("t", "aten.t.default", {ref("mm")}, {8, 16}),
                         node("view", "aten.view.default", {ref("t"), json::array({128})}, {128}),
                         node("relu", "aten.relu.default", {ref("view")}, {128})},
                        {"relu"});
  reshaped["nodes"][1]["stride"] = json::array({1, 8});
  Candidate c;
  ASSERT_TRUE(synthesize_pipeline(read(reshaped), "cpu", &c).ok());
  EXPECT_NE(c.files["model_new.py"].find("c_t = synth_copy.contiguous(v_t)\n"
                                         "        v_view = c_t.view([128])"),
            std::string::npos)
      << c.files["model_new.py"];
}

TEST(Pipeline, CatAndStackGoThroughTheCopyKernelAndZerosLikeIsAnAllocation) {
  json doc =
      graph({tensor_input("a", "input", {16, 32}), tensor_input("b", "input", {32, 8}),
             tensor_input("x", "input", {16, 8})},
            {node("mm", "aten.mm.default", {ref("a"), ref("b")}, {16, 8}),
             node("cat", "aten.cat.default", {json::array({ref("mm"), ref("x")}), -1}, {16, 16}),
             node("zeros_like", "aten.zeros_like.default", {ref("cat")}, {16, 16}),
             node("add", "aten.add.Tensor", {ref("zeros_like"), ref("cat")}, {16, 16}),
             node("relu", "aten.relu.default", {ref("add")}, {16, 16})},
            {"relu"});
  doc["nodes"][2]["kwargs"] = {{"pin_memory", false}};
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_cat = synth_copy.cat([v_mm, x], -1)"), std::string::npos) << model;
  EXPECT_NE(model.find("v_zeros_like = torch.zeros_like(v_cat)"), std::string::npos) << model;
  EXPECT_NE(model.find("v_relu = self._kernels[0](v_zeros_like, v_cat)"), std::string::npos)
      << model;
  EXPECT_TRUE(c.files.count("kernels/strided_copy.cpp"));
  EXPECT_NE(c.files["synth_copy.py"].find("def stack("), std::string::npos);

  // An allocation that asks for more than zeros of the same kind is no step.
  doc["nodes"][2]["kwargs"] = {{"dtype", "torch.float16"}};
  std::vector<PipelineStep> steps;
  EXPECT_FALSE(plan_pipeline(read(doc), &steps).ok());
}

TEST(Pipeline, AKernelWritesItsResultIntoItsSliceOfTheStackThatTakesIt) {
  // A two-step recurrence: h1 = tanh(x w), h2 = tanh(h1 w), stacked along dim 1. Each gate
  // kernel writes into its select of the stack, allocated before the first; the next GEMM
  // reads h1 there, as a matrix whose rows lie the stack's row apart.
  json doc = graph(
      {tensor_input("p_w", "parameter", {8, 8}, "w"), tensor_input("x", "input", {4, 8})},
      {node("mm", "aten.mm.default", {ref("x"), ref("p_w")}, {4, 8}),
       node("h1", "aten.tanh.default", {ref("mm")}, {4, 8}),
       node("mm_1", "aten.mm.default", {ref("h1"), ref("p_w")}, {4, 8}),
       node("h2", "aten.tanh.default", {ref("mm_1")}, {4, 8}),
       node("stack", "aten.stack.default", {json::array({ref("h1"), ref("h2")}), 1}, {4, 2, 8})},
      {"stack"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  std::string model = c.files["model_new.py"];
  EXPECT_NE(model.find("        v_stack = torch.empty((4, 2, 8, ), dtype=torch.float32, "
                       "device=v_mm.device)\n"
                       "        v_h1 = self._kernels[0](v_mm, out=v_stack.select(1, 0))\n"
                       "        v_mm_1 = torch.mm(v_h1, self.w)\n"
                       "        v_h2 = self._kernels[0](v_mm_1, out=v_stack.select(1, 1))\n"
                       "        return v_stack\n"),
            std::string::npos)
      << model;
  EXPECT_EQ(model.find("synth_copy"), std::string::npos) << model;
  EXPECT_FALSE(c.files.count("kernels/strided_copy.cpp"));

  // A part a view reads as well (a reshape of it, which would have to copy a slice) is made
  // on its own and copied into the stack.
  json viewed = doc;
  viewed["nodes"].push_back(
      node("flat", "aten.view.default", {ref("h1"), json::array({32})}, {32}));
  viewed["outputs"] = {"stack", "flat"};
  ASSERT_TRUE(synthesize_pipeline(read(viewed), "cpu", &c).ok());
  model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_h1 = self._kernels[0](v_mm)\n"), std::string::npos) << model;
  EXPECT_NE(model.find("out=v_stack.select(1, 1))"), std::string::npos) << model;

  // A part the task returns as well is copied into the stack.
  doc["outputs"] = {"stack", "h1"};
  ASSERT_TRUE(synthesize_pipeline(read(doc), "cpu", &c).ok());
  model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_h1 = self._kernels[0](v_mm)\n"), std::string::npos) << model;
  EXPECT_NE(model.find("v_stack = synth_copy.stack([v_h1, v_h2], 1, out=v_stack, written=(1,))"),
            std::string::npos)
      << model;
}

TEST(Pipeline, AKernelWritesIntoANarrowOfACatWhereItsInputsSuitRowsOfSeveralDims) {
  // y = x * t, cat((y, x), dim 1) over (2, 3, 4, 4): y's slice is rows of 3 x 4 x 4, 96
  // apart. A table t of (3, 4, 4) runs along all of such a row; one of (3, 1, 1), a value per
  // channel, does not, and y is made on its own and copied.
  const auto model_for = [](std::vector<std::int64_t> table) {
    json doc = graph(
        {tensor_input("p_t", "parameter", table, "t"), tensor_input("x", "input", {2, 3, 4, 4})},
        {node("y", "aten.mul.Tensor", {ref("x"), ref("p_t")}, {2, 3, 4, 4}),
         node("cat", "aten.cat.default", {json::array({ref("y"), ref("x")}), 1}, {2, 6, 4, 4})},
        {"cat"});
    Candidate c;
    Status s = synthesize_pipeline(read(doc), "cpu", &c);
    EXPECT_TRUE(s.ok()) << s.message();
    return c.files["model_new.py"];
  };
  std::string model = model_for({3, 4, 4});
  EXPECT_NE(model.find("v_y = self._kernels[0](x, self.t, out=v_cat.narrow(1, 0, 3))\n"
                       "        v_cat = synth_copy.cat([v_y, x], 1, out=v_cat, written=(0,))\n"),
            std::string::npos)
      << model;
  model = model_for({3, 1, 1});
  EXPECT_NE(model.find("v_y = self._kernels[0](x, self.t)\n"
                       "        v_cat = synth_copy.cat([v_y, x], 1)\n"),
            std::string::npos)
      << model;
}

TEST(Pipeline, APixelShuffleCopiesIntoItsSliceOfTheCatThatTakesIt) {
  // A U-Net's decoder: an upsampling convolution's pixel shuffle beside the skip input, cat
  // along the channels, then a convolution: the shuffle's copy writes into its narrow of the
  // cat, and the cat copies only the skip.
  json doc =
      graph({tensor_input("p_w", "parameter", {16, 3, 1, 1}, "up.weight"),
             tensor_input("p_w2", "parameter", {5, 7, 3, 3}, "dec.weight"),
             tensor_input("x", "input", {2, 3, 4, 4}), tensor_input("skip", "input", {2, 3, 8, 8})},
            {node("conv2d", "aten.conv2d.default", {ref("x"), ref("p_w")}, {2, 16, 4, 4}),
             node("pixel_shuffle", "aten.pixel_shuffle.default", {ref("conv2d"), 2}, {2, 4, 8, 8}),
             node("cat", "aten.cat.default", {json::array({ref("skip"), ref("pixel_shuffle")}), 1},
                  {2, 7, 8, 8}),
             node("conv2d_1", "aten.conv2d.default", {ref("cat"), ref("p_w2")}, {2, 5, 6, 6}),
             node("relu", "aten.relu.default", {ref("conv2d_1")}, {2, 5, 6, 6})},
            {"relu"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("        v_cat = torch.empty((2, 7, 8, 8, ), dtype=torch.float32, "
                       "device=v_conv2d.device)\n"
                       "        v_pixel_shuffle = synth_copy.pixel_shuffle(v_conv2d, 2, "
                       "out=v_cat.narrow(1, 3, 4))\n"
                       "        v_cat = synth_copy.cat([skip, v_pixel_shuffle], 1, out=v_cat, "
                       "written=(1,))\n"),
            std::string::npos)
      << model;
}

TEST(Pipeline, APixelShuffleIsACopyAndAPoolingWithItsOpsAKernelStep) {
  // conv2d -> pixel_shuffle(2) -> relu -> max_pool2d(2) -> sigmoid.
  json doc = graph({tensor_input("p_w", "parameter", {16, 3, 3, 3}, "conv.weight"),
                    tensor_input("x", "input", {2, 3, 8, 8})},
                   {node("conv", "aten.conv2d.default",
                         {ref("x"), ref("p_w"), nullptr, {1, 1}, {1, 1}}, {2, 16, 8, 8}),
                    node("shuffle", "aten.pixel_shuffle.default", {ref("conv"), 2}, {2, 4, 16, 16}),
                    node("relu", "aten.relu.default", {ref("shuffle")}, {2, 4, 16, 16}),
                    node("pool", "aten.max_pool2d.default", {ref("relu"), {2, 2}}, {2, 4, 8, 8}),
                    node("sigmoid", "aten.sigmoid.default", {ref("pool")}, {2, 4, 8, 8})},
                   {"sigmoid"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cuda", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_shuffle = synth_copy.pixel_shuffle(v_conv, 2)"), std::string::npos)
      << model;
  EXPECT_NE(model.find("v_sigmoid = self._kernels[0](v_shuffle)"), std::string::npos) << model;
  EXPECT_NE(c.files["synth_copy.py"].find("def pixel_shuffle("), std::string::npos);
  ASSERT_TRUE(c.files.count("kernels/fused_pool_k0.cu"));
  EXPECT_NE(c.files["kernels/fused_pool_k0.cu"].find("extern \"C\" int fused_pool_k0("),
            std::string::npos);
  EXPECT_NE(c.files["synth_kernel0.py"].find("lib.bind(\"fused_pool_k0\""), std::string::npos);

  // A transposed view pooled: the pooling kernel reads it through its strides, no copy first.
  json strided = graph({tensor_input("x", "input", {2, 8, 8, 4})},
                       {node("t", "aten.transpose.int", {ref("x"), 1, 3}, {2, 4, 8, 8}),
                        node("pool", "aten.max_pool2d.default", {ref("t"), {2, 2}}, {2, 4, 4, 4}),
                        node("sigmoid", "aten.sigmoid.default", {ref("pool")}, {2, 4, 4, 4})},
                       {"sigmoid"});
  strided["nodes"][0]["stride"] = {256, 1, 4, 32};
  Candidate viewed;
  s = synthesize_pipeline(read(strided), "cpu", &viewed);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(viewed.files["model_new.py"].find("synth_copy"), std::string::npos)
      << viewed.files["model_new.py"];
  EXPECT_NE(viewed.files["model_new.py"].find("v_sigmoid = self._kernels[0](v_t)"),
            std::string::npos)
      << viewed.files["model_new.py"];
}

TEST(Pipeline, TheRowAndElementwiseKernelsReadInPlaceTheViewsTheirLayoutsWalk) {
  // x (6, 5, 16) sliced to its last dim's elements 3..10: rows of 8, 16 apart.
  const auto sliced = [](const json& after, const std::vector<std::int64_t>& shape) {
    json doc = graph({tensor_input("x", "input", {6, 5, 16})},
                     {node("s", "aten.slice.Tensor", {ref("x"), 2, 3, 11}, {6, 5, 8}),
                      node("out", after["target"], after["args"], shape)},
                     {"out"});
    doc["nodes"][0]["stride"] = json::array({80, 16, 1});
    Candidate c;
    Status s = synthesize_pipeline(read(doc), "cpu", &c);
    EXPECT_TRUE(s.ok()) << s.message();
    return c.files["model_new.py"];
  };
  // Elementwise: the slice's rows are the kernel's rows, each 16 elements after the last.
  std::string model =
      sliced({{"target", "aten.relu.default"}, {"args", json::array({ref("s")})}}, {6, 5, 8});
  EXPECT_EQ(model.find("synth_copy"), std::string::npos) << model;
  EXPECT_NE(model.find("v_out = self._kernels[0](v_s)"), std::string::npos) << model;
  // Rows along the last dim, or down the middle one: each group of dims is one run of memory.
  for (int dim : {2, 1}) {
    model = sliced({{"target", "aten.sum.dim_IntList"}, {"args", {ref("s"), {dim}}}},
                   dim == 2 ? std::vector<std::int64_t>{6, 5} : std::vector<std::int64_t>{6, 8});
    EXPECT_EQ(model.find("synth_copy"), std::string::npos) << model;
  }
  // Summed over dim 0, the rows' inner dims (5, 8) are not one run: the kernel reads a copy.
  model = sliced({{"target", "aten.sum.dim_IntList"}, {"args", {ref("s"), {0}}}}, {5, 8});
  EXPECT_NE(model.find("c_s = synth_copy.contiguous(v_s)"), std::string::npos) << model;
}

TEST(Pipeline, ParametersOfAModuleListKeepTheirKeys) {
  // experts.0.weight and experts.1.weight: ModelNew holds an nn.ModuleList, so its state_dict
  // has the task's keys and the reference's weights load.
  json doc = graph({tensor_input("p_w0", "parameter", {8, 4}, "experts.0.weight"),
                    tensor_input("p_w1", "parameter", {8, 4}, "experts.1.weight"),
                    tensor_input("x", "input", {2, 4})},
                   {node("linear", "aten.linear.default", {ref("x"), ref("p_w0")}, {2, 8}),
                    node("linear_1", "aten.linear.default", {ref("x"), ref("p_w1")}, {2, 8}),
                    node("add", "aten.add.Tensor", {ref("linear"), ref("linear_1")}, {2, 8})},
                   {"add"});
  Candidate c;
  Status s = synthesize_pipeline(read(doc), "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("self.experts = nn.ModuleList([nn.Module() for _ in range(2)])"),
            std::string::npos)
      << model;
  EXPECT_NE(model.find("self.experts[1].weight = nn.Parameter("), std::string::npos) << model;
  EXPECT_NE(model.find("F.linear(x, self.experts[1].weight)"), std::string::npos) << model;

  // A list of lists (blocks.0.1.weight): the inner list replaces the item the outer made.
  doc["inputs"][0]["target"] = "blocks.0.1.weight";
  doc["inputs"][1]["target"] = "blocks.1.0.weight";
  Candidate nested;
  ASSERT_TRUE(synthesize_pipeline(read(doc), "cpu", &nested).ok());
  const std::string& lists = nested.files["model_new.py"];
  EXPECT_NE(lists.find("self.blocks = nn.ModuleList([nn.Module() for _ in range(2)])\n"
                       "        self.blocks[0] = nn.ModuleList([nn.Module() for _ in range(2)])\n"
                       "        self.blocks[1] = nn.ModuleList([nn.Module() for _ in range(1)])"),
            std::string::npos)
      << lists;
  EXPECT_NE(lists.find("self.blocks[0][1].weight = nn.Parameter("), std::string::npos) << lists;
}

TEST(Pipeline, AnItemOfAResultTheRunMakesStaysInTheRun) {
  // linear -> view -> max over the last dim -> its values -> minus their mean: the view is a
  // step, max and the item it gives are one run with the rest.
  json doc = graph(
      {tensor_input("p_w", "parameter", {64, 32}, "fc.weight"),
       tensor_input("x", "input", {8, 32})},
      {node("linear", "aten.linear.default", {ref("x"), ref("p_w")}, {8, 64}),
       node("view", "aten.view.default", {ref("linear"), json::array({8, 16, 4})}, {8, 16, 4}),
       node("max", "aten.max.dim", {ref("view"), -1}, json::array({{8, 16}, {8, 16}}),
            json::array({"float32", "int64"})),
       node("getitem", "operator.getitem", {ref("max"), 0}, {8, 16}),
       node("mean", "aten.mean.dim", {ref("getitem"), json::array({1}), true}, {8, 1}),
       node("sub", "aten.sub.Tensor", {ref("getitem"), ref("mean")}, {8, 16})},
      {"sub"});
  std::vector<PipelineStep> steps;
  Graph g = read(doc);
  Status s = plan_pipeline(g, &steps);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1].kind, PipelineStep::Kind::kView);
  EXPECT_EQ(steps[2].ops.size(), 4u);
  EXPECT_EQ(steps[2].reads, std::vector<int>{g.find("view")});

  // No one plan takes a max over one dim and a mean over another: two kernels, the first
  // making max's values, the second reading them.
  Candidate c;
  s = synthesize_pipeline(g, "cpu", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.files.count("kernels/fused_rows_k0.cpp"));
  EXPECT_TRUE(c.files.count("kernels/fused_rows_k1.cpp"));
  const std::string& model = c.files["model_new.py"];
  EXPECT_NE(model.find("v_getitem = self._kernels[0](v_view)"), std::string::npos) << model;
  EXPECT_NE(model.find("v_sub = self._kernels[1](v_getitem)"), std::string::npos) << model;
}

/// A gated MLP's middle: silu(x W_g^T) * (x W_u^T), with a view of a mask buffer between a
/// scaling of the product and a masked fill (rows of width features).
json gated(int rows, int width, int hidden) {
  json mask = tensor_input("b_mask", "buffer", {rows, hidden}, "mask");
  mask["dtype"] = "bool";
  return graph({tensor_input("p_gate", "parameter", {hidden, width}, "gate.weight"),
                tensor_input("p_up", "parameter", {hidden, width}, "up.weight"), mask,
                tensor_input("x", "input", {rows, width})},
               {node("linear", "aten.linear.default", {ref("x"), ref("p_gate")}, {rows, hidden}),
                node("silu", "aten.silu.default", {ref("linear")}, {rows, hidden}),
                node("linear_1", "aten.linear.default", {ref("x"), ref("p_up")}, {rows, hidden}),
                node("mul", "aten.mul.Tensor", {ref("silu"), ref("linear_1")}, {rows, hidden}),
                node("mul_1", "aten.mul.Tensor", {ref("mul"), 0.5}, {rows, hidden}),
                node("alias", "aten.alias.default", {ref("b_mask")}, {rows, hidden}, "bool"),
                node("masked_fill", "aten.masked_fill.Scalar", {ref("mul_1"), ref("alias"), 0.0},
                     {rows, hidden})},
               {"masked_fill"});
}

TEST(Pipeline, KernelOpsALibraryCallOrAViewDoesNotNeedJoinOneRun) {
  // In the task's order silu falls between the GEMMs and the mask's view between the scaling
  // and the fill; neither step reads them, so both GEMMs and the view go first, and silu, the
  // product, the scaling and the fill are one kernel. Likewise at another size.
  for (const auto& [rows, width, hidden] : {std::tuple{16, 32, 64}, std::tuple{7, 48, 24}}) {
    Graph g = read(gated(rows, width, hidden));
    std::vector<PipelineStep> steps;
    Status s = plan_pipeline(g, &steps);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(steps.size(), 4u);
    EXPECT_EQ(steps[0].kind, PipelineStep::Kind::kLibrary);
    EXPECT_EQ(steps[1].kind, PipelineStep::Kind::kLibrary);
    EXPECT_EQ(steps[2].kind, PipelineStep::Kind::kView);
    EXPECT_EQ(steps[3].kind, PipelineStep::Kind::kKernel);
    EXPECT_EQ(steps[3].ops.size(), 4u);
    EXPECT_EQ(steps[3].reads,
              (std::vector<int>{g.find("linear"), g.find("linear_1"), g.find("alias")}));

    Candidate c;
    s = synthesize_pipeline(g, "cpu", &c);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(c.files.count("kernels/fused_elementwise_k1.cpp"), 0u);
    const std::string& model = c.files["model_new.py"];
    EXPECT_NE(model.find("v_masked_fill = self._kernels[0](v_linear, v_linear_1, v_alias)"),
              std::string::npos)
        << model;
  }
}

}  // namespace
}  // namespace cuda_agent::synth
