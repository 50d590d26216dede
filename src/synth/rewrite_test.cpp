#include "synth/rewrite.h"

#include <gtest/gtest.h>

#include <tuple>

#include "synth/graph_test_util.h"
#include "synth/model_source.h"
#include "synth/row_plan.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// x @ diag(d) (or diag(d) @ x when left), then relu; diag's offset as given.
Graph diag_product(int n, int m, bool left, int offset = 0) {
  std::vector<int> x_shape = left ? std::vector<int>{n, m} : std::vector<int>{m, n};
  json matmul_args =
      left ? json::array({ref("diag"), ref("x")}) : json::array({ref("x"), ref("diag")});
  json doc = {{"schema", "cuda-agent.graph/1"},
              {"inputs", {tensor_input("x", "input", x_shape), tensor_input("d", "input", {n})}},
              {"nodes",
               {node("diag", "aten.diag.default", {ref("d"), offset}, {n, n}),
                node("matmul", "aten.matmul.default", matmul_args, x_shape),
                node("relu", "aten.relu.default", {ref("matmul")}, x_shape)}},
              {"outputs", {"relu"}}};
  Graph g;
  Status s = read_graph(doc, &g);
  EXPECT_TRUE(s.ok()) << s.message();
  return g;
}

TEST(SynthRewrite, AProductWithADiagonalMatrixBecomesAColumnScaling) {
  for (auto [n, m] : {std::pair{64, 32}, std::pair{7, 3}}) {  // fires on a perturbed shape too
    Graph g = diag_product(n, m, /*left=*/false);
    auto applied = rewrite_graph(&g);
    ASSERT_EQ(applied.size(), 2u);
    EXPECT_EQ(applied[0].name, "diag_matmul");
    EXPECT_EQ(applied[1].name, "dead_op");  // the diagonal matrix is no longer built
    ASSERT_EQ(g.ops.size(), 2u);
    EXPECT_EQ(g.ops[0].target, "aten.mul.Tensor");
    EXPECT_EQ(g.values[g.ops[0].inputs[1]].name, "d");
    EXPECT_EQ(g.values[g.outputs[0]].name, "relu");
  }
}

TEST(SynthRewrite, ADiagonalOnTheLeftScalesRowsThroughAColumnView) {
  Graph g = diag_product(16, 8, /*left=*/true);
  rewrite_graph(&g);
  ASSERT_EQ(g.ops[0].target, "aten.mul.Tensor");
  const Value& column = g.values[g.ops[0].inputs[1]];
  EXPECT_EQ(column.results[0].shape, (std::vector<std::int64_t>{16, 1}));
  EXPECT_EQ(value_expression(column), "d.unsqueeze(-1)");
  EXPECT_EQ(forward_parameters(g), ", x, d");  // the view is not an input of its own
}

TEST(SynthRewrite, AnOffDiagonalMatrixIsLeftAlone) {
  Graph g = diag_product(16, 8, /*left=*/false, /*offset=*/1);
  auto applied = rewrite_graph(&g);
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(g.ops[1].target, "aten.matmul.default");
}

TEST(SynthRewrite, AnUnsqueezedInputBecomesAViewTheModelMakes) {
  json doc = {{"schema", "cuda-agent.graph/1"},
              {"inputs", {tensor_input("x", "input", {6, 10})}},
              {"nodes",
               {node("u", "aten.unsqueeze.default", {ref("x"), 1}, {6, 1, 10}),
                node("relu", "aten.relu.default", {ref("u")}, {6, 1, 10})}},
              {"outputs", {"relu"}}};
  Graph g;
  ASSERT_TRUE(read_graph(doc, &g).ok());
  auto applied = rewrite_graph(&g);
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0].name, "input_view");
  ASSERT_EQ(g.ops.size(), 1u);  // the unsqueeze itself is gone
  const Value& view = g.values[g.ops[0].inputs[0]];
  EXPECT_EQ(view.results[0].shape, (std::vector<std::int64_t>{6, 1, 10}));
  EXPECT_EQ(value_expression(view), "x.unsqueeze(1)");
  EXPECT_EQ(g.ops[0].args[0]["ref"], view.name);
  EXPECT_EQ(forward_parameters(g), ", x");
}

/// batch_norm over x of this shape (channels its dim 1), then relu; training as given, the
/// weight and bias present or None.
Graph batch_norm_relu(const std::vector<int>& shape, bool training, bool affine = true) {
  const int channels = shape[1];
  json inputs = {tensor_input("x", "input", shape),
                 tensor_input("b_mean", "buffer", {channels}, "running_mean"),
                 tensor_input("b_var", "buffer", {channels}, "running_var")};
  if (affine) {
    inputs.push_back(tensor_input("p_weight", "parameter", {channels}, "weight"));
    inputs.push_back(tensor_input("p_bias", "parameter", {channels}, "bias"));
  }
  json weight = affine ? ref("p_weight") : json(nullptr);
  json bias = affine ? ref("p_bias") : json(nullptr);
  return read(
      graph(inputs,
            {node("bn", "aten.batch_norm.default",
                  {ref("x"), weight, bias, ref("b_mean"), ref("b_var"), training, 0.1, 1e-5, false},
                  shape),
             node("relu", "aten.relu.default", {ref("bn")}, shape)},
            {"relu"}));
}

TEST(SynthRewrite, BatchNormInEvalModeBecomesAPerChannelAffineMap) {
  // NCHW, and perturbed shapes: NCL, NC (no trailing dims: the vectors need no view).
  for (const auto& shape : {std::vector<int>{8, 16, 5, 7}, {3, 6, 11}, {9, 4}}) {
    Graph g = batch_norm_relu(shape, /*training=*/false);
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "batch_norm_eval");
    std::vector<std::string> ops;
    for (const Op& op : g.ops) ops.push_back(op.name);
    EXPECT_EQ(ops, (std::vector<std::string>{"add", "rsqrt", "sub", "mul", "mul", "add", "relu"}));
    // The op that replaces batch_norm makes its value, which relu still reads.
    EXPECT_EQ(g.values[g.ops[5].value].name, "bn");
    EXPECT_EQ(g.values[g.ops[6].inputs[0]].name, "bn");
    for (std::size_t k = 0; k < g.ops.size(); ++k) EXPECT_EQ(g.values[g.ops[k].value].op, (int)k);
    // eps is added to the variance, which is read as a (C, 1, ...) view where x has more dims.
    EXPECT_EQ(g.ops[0].args[1], 1e-5);
    const Value& var = g.values[g.ops[0].inputs[0]];
    std::vector<std::int64_t> column(shape.size() - 1, 1);
    column[0] = shape[1];
    EXPECT_EQ(var.results[0].shape, column);
    EXPECT_EQ(value_expression(var), shape.size() == 4   ? "self.running_var.view(-1, 1, 1)"
                                     : shape.size() == 3 ? "self.running_var.view(-1, 1)"
                                                         : "self.running_var");
    EXPECT_EQ(forward_parameters(g), ", x");  // the views are not inputs of their own
    // A kernel's caller makes the view without a view op: the same calls on synth_piece's
    // Viewed of the buffer; the input itself, and the buffer read whole, stay as they are.
    EXPECT_EQ(viewed_expression(g, var),
              shape.size() == 4   ? "synth_piece.viewed(self.running_var).view(-1, 1, 1)"
              : shape.size() == 3 ? "synth_piece.viewed(self.running_var).view(-1, 1)"
                                  : "self.running_var");
    EXPECT_EQ(viewed_expression(g, g.values[g.find("x")]), "x");
    EXPECT_EQ(reads_views(g, {g.find("x"), g.ops[0].inputs[0]}), shape.size() > 2);
  }
}

TEST(SynthRewrite, BatchNormWithoutWeightAndBiasSkipsTheirOps) {
  Graph g = batch_norm_relu({4, 8, 6}, /*training=*/false, /*affine=*/false);
  rewrite_graph(&g);
  std::vector<std::string> ops;
  for (const Op& op : g.ops) ops.push_back(op.name);
  EXPECT_EQ(ops, (std::vector<std::string>{"add", "rsqrt", "sub", "mul", "relu"}));
}

TEST(SynthRewrite, BatchNormInTrainingModeIsLeftAlone) {
  Graph g = batch_norm_relu({4, 8, 6}, /*training=*/true);
  EXPECT_TRUE(rewrite_graph(&g).empty());
  EXPECT_EQ(g.ops[0].name, "batch_norm");
}

/// linear(x, weight[, bias]) then gelu, over x (rows, k) of dtype; the linear's value the output
/// instead where gelu is false.
Graph linear_gelu(int rows, int k, int features, bool bias, const std::string& dtype = "float32",
                  bool gelu = true) {
  json inputs = {tensor_input("x", "input", {rows, k}),
                 tensor_input("p_weight", "parameter", {features, k}, "weight")};
  json args = {ref("x"), ref("p_weight")};
  if (bias) {
    inputs.push_back(tensor_input("p_bias", "parameter", {features}, "bias"));
    args.push_back(ref("p_bias"));
  }
  for (json& input : inputs) input["dtype"] = dtype;
  json nodes = json::array({node("linear", "aten.linear.default", args, {rows, features}, dtype)});
  if (gelu)
    nodes.push_back(
        node("gelu", "aten.gelu.default", json::array({ref("linear")}), {rows, features}, dtype));
  return read(graph(inputs, nodes, {gelu ? "gelu" : "linear"}));
}

std::vector<std::string> op_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Op& op : g.ops) names.push_back(op.name);
  return names;
}

TEST(SynthRewrite, ALinearRunsInTheLibraryAndItsBiasJoinsTheFusedOps) {
  for (auto [rows, k, features] : {std::tuple{64, 32, 48}, std::tuple{7, 5, 3}}) {
    Graph g = linear_gelu(rows, k, features, /*bias=*/true);
    auto applied = rewrite_graph(&g);
    // The bias leaves the linear for an addition gelu's kernel makes, then the GEMM of a task
    // input becomes the library's.
    ASSERT_EQ(applied.size(), 2u);
    EXPECT_EQ(applied[0].name, "linear_bias");
    EXPECT_EQ(applied[1].name, "library_op");
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"add", "gelu"}));
    const Value& product = g.values[g.ops[0].inputs[0]];
    EXPECT_EQ(value_expression(product), "torch.nn.functional.linear(x, self.weight)");
    EXPECT_EQ(product.results[0].shape, (std::vector<std::int64_t>{rows, features}));
    EXPECT_EQ(g.values[g.ops[0].inputs[1]].name, "p_bias");
    EXPECT_EQ(g.values[g.ops[0].value].name, "linear_biased");  // gelu reads the sum
    EXPECT_EQ(g.ops[1].inputs[0], g.ops[0].value);
    EXPECT_EQ(forward_parameters(g), ", x");  // the product is no input of its own
    EXPECT_NE(module_state_source(g).find("self.weight = nn.Parameter"), std::string::npos);
  }
}

TEST(SynthRewrite, ASixteenBitLinearKeepsItsBiasInTheLibrarysEpilogue) {
  // Rounded to bfloat16 once there, as eager rounds it, not once before and once after.
  Graph g = linear_gelu(16, 8, 4, /*bias=*/true, "bfloat16");
  rewrite_graph(&g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"gelu"}));
  EXPECT_EQ(value_expression(g.values[g.ops[0].inputs[0]]),
            "torch.nn.functional.linear(x, self.weight, self.bias)");
}

TEST(SynthRewrite, AGemmWithNothingAfterItOrReadingAnOpsResultIsLeftAlone) {
  Graph alone = linear_gelu(16, 8, 4, /*bias=*/true, "float32", /*gelu=*/false);
  EXPECT_TRUE(rewrite_graph(&alone).empty());  // nothing would fuse: the library op is all

  Graph after_relu =
      read(graph({tensor_input("x", "input", {16, 8}), tensor_input("w", "input", {4, 8})},
                 {node("relu", "aten.relu.default", {ref("x")}, {16, 8}),
                  node("linear", "aten.linear.default", {ref("relu"), ref("w")}, {16, 4}),
                  node("tanh", "aten.tanh.default", {ref("linear")}, {16, 4})},
                 {"tanh"}));
  EXPECT_TRUE(rewrite_graph(&after_relu).empty());
}

TEST(SynthRewrite, ABatchedProductWithATransposedOperandRunsInTheLibrary) {
  for (int n : {32, 5}) {
    Graph g = read(
        graph({tensor_input("q", "input", {2, 3, n, 8}), tensor_input("k", "input", {2, 3, n, 8})},
              {node("t", "aten.transpose.int", {ref("k"), -2, -1}, {2, 3, 8, n}),
               node("matmul", "aten.matmul.default", {ref("q"), ref("t")}, {2, 3, n, n}),
               node("mul", "aten.mul.Tensor", {ref("matmul"), 0.125}, {2, 3, n, n})},
              {"mul"}));
    auto applied = rewrite_graph(&g);
    ASSERT_EQ(applied.size(), 2u);
    EXPECT_EQ(applied[0].name, "library_op");
    EXPECT_EQ(applied[1].name, "dead_op");  // the transpose is the library's to take
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"mul"}));
    EXPECT_EQ(value_expression(g.values[g.ops[0].inputs[0]]),
              "torch.matmul(q, k.transpose(-2, -1))");
  }
}

TEST(SynthRewrite, ABatchedProductWhoseBatchDimsNeedACopyIsLeftAlone) {
  // Batch dims (2, 3) of strides (20, 40): torch's matmul would copy q to fold them.
  json q = tensor_input("q", "input", {2, 3, 4, 5});
  q["stride"] = {20, 40, 5, 1};
  Graph g = read(graph({q, tensor_input("k", "input", {2, 3, 5, 4})},
                       {node("matmul", "aten.matmul.default", {ref("q"), ref("k")}, {2, 3, 4, 4}),
                        node("relu", "aten.relu.default", {ref("matmul")}, {2, 3, 4, 4})},
                       {"relu"}));
  EXPECT_TRUE(rewrite_graph(&g).empty());
}

/// conv2d of x (n, c, h, w) with a bias, stride 1 and padding 1, then hardswish, in dtype.
Graph conv_hardswish(const std::vector<int>& x_shape, int out_channels,
                     const std::string& dtype = "float32") {
  const std::vector<int> out = {x_shape[0], out_channels, x_shape[2], x_shape[3]};
  json inputs = {tensor_input("x", "input", x_shape),
                 tensor_input("p_w", "parameter", {out_channels, x_shape[1], 3, 3}, "conv.weight"),
                 tensor_input("p_b", "parameter", {out_channels}, "conv.bias")};
  for (json& input : inputs) input["dtype"] = dtype;
  return read(graph(inputs,
                    {node("conv", "aten.conv2d.default",
                          {ref("x"), ref("p_w"), ref("p_b"), {1, 1}, {1, 1}}, out, dtype),
                     node("hs", "aten.hardswish.default", {ref("conv")}, out, dtype)},
                    {"hs"}));
}

TEST(SynthRewrite, AConvolutionRunsInTheLibraryAndItsBiasIsAddedPerChannel) {
  for (const auto& shape : {std::vector<int>{4, 8, 16, 16}, {3, 5, 7, 9}}) {
    Graph g = conv_hardswish(shape, 6);
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "library_op");
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"add", "hardswish"}));
    EXPECT_EQ(value_expression(g.values[g.ops[0].inputs[0]]),
              "torch.nn.functional.conv2d(x, self.conv.weight, stride=[1,1], padding=[1,1])");
    const Value& bias = g.values[g.ops[0].inputs[1]];
    EXPECT_EQ(value_expression(bias), "self.conv.bias.view(-1, 1, 1)");
    EXPECT_EQ(bias.results[0].shape, (std::vector<std::int64_t>{6, 1, 1}));
  }
}

TEST(SynthRewrite, ASixteenBitConvolutionWithABiasIsLeftAlone) {
  // Its bias would be a torch kernel of its own after the library's, rounded twice.
  Graph g = conv_hardswish({2, 4, 8, 8}, 4, "float16");
  EXPECT_TRUE(rewrite_graph(&g).empty());
}

/// group_norm of x (2, channels, ...spatial) in `groups`, then a multiply by a (channels, 1, 1)
/// scale where scaled, then silu.
Graph group_norm_silu(const std::vector<int>& x_shape, int groups, bool scaled = false) {
  const int channels = x_shape[1];
  json inputs = {tensor_input("x", "input", x_shape),
                 tensor_input("p_w", "parameter", {channels}, "norm.weight"),
                 tensor_input("p_b", "parameter", {channels}, "norm.bias"),
                 tensor_input("p_s", "parameter", {channels, 1, 1}, "scale")};
  json nodes =
      json::array({node("gn", "aten.group_norm.default",
                        {ref("x"), groups, ref("p_w"), ref("p_b"), 1e-5, false}, x_shape)});
  std::string last = "gn";
  if (scaled) {
    nodes.push_back(node("mul", "aten.mul.Tensor", {ref("gn"), ref("p_s")}, x_shape));
    last = "mul";
  }
  // testing::ref: a std::string argument would find std::ref by argument-dependent lookup.
  nodes.push_back(node("silu", "aten.silu.default", {testing::ref(last)}, x_shape));
  return read(graph(inputs, nodes, {"silu"}));
}

TEST(SynthRewrite, GroupNormIsAnInstanceNormOfTheInputViewedInGroups) {
  for (const auto& [shape, groups] :
       {std::pair{std::vector<int>{2, 8, 5, 7}, 4}, std::pair{std::vector<int>{3, 6, 9}, 3}}) {
    Graph g = group_norm_silu(shape, groups);
    auto applied = rewrite_graph(&g);
    ASSERT_EQ(applied.size(), 1u);
    EXPECT_EQ(applied[0].name, "group_norm");
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"instance_norm", "mul", "add", "silu"}));
    const std::string G = std::to_string(groups);
    EXPECT_EQ(value_expression(g.values[g.ops[0].inputs[0]]), "x.unflatten(1, (" + G + ", -1))");
    const std::string ones = shape.size() == 4 ? ", 1, 1)" : ", 1)";
    EXPECT_EQ(value_expression(g.values[g.ops[1].inputs[1]]),
              "self.norm.weight.view(" + G + ", -1" + ones);
    EXPECT_EQ(value_expression(g.values[g.ops[2].inputs[1]]),
              "self.norm.bias.view(" + G + ", -1" + ones);
    // Every op computes in the split shape; ModelNew returns it viewed back.
    std::vector<std::int64_t> split(shape.begin(), shape.end());
    split[1] = groups;
    split.insert(split.begin() + 2, shape[1] / groups);
    for (const Op& op : g.ops) EXPECT_EQ(g.values[op.value].results[0].shape, split) << op.name;
    EXPECT_EQ(g.output_view, ".flatten(1, 2)");
    EXPECT_EQ(g.values[g.ops[3].inputs[0]].name, "gn");  // silu still reads the norm's value
    EXPECT_EQ(forward_parameters(g), ", x");
  }
}

TEST(SynthRewrite, APerChannelTensorAfterAGroupNormIsReadInGroupsToo) {
  Graph g = group_norm_silu({2, 8, 5, 7}, 4, /*scaled=*/true);
  rewrite_graph(&g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"instance_norm", "mul", "add", "mul", "silu"}));
  const Value& scale = g.values[g.ops[3].inputs[1]];
  EXPECT_EQ(value_expression(scale), "self.scale.unflatten(0, (4, -1))");
  EXPECT_EQ(scale.results[0].shape, (std::vector<std::int64_t>{4, 2, 1, 1}));
}

TEST(SynthRewrite, AGroupNormFollowedByAReductionIsLeftAlone) {
  Graph g =
      read(graph({tensor_input("x", "input", {2, 8, 5}), tensor_input("p_w", "parameter", {8}, "w"),
                  tensor_input("p_b", "parameter", {8}, "b")},
                 {node("gn", "aten.group_norm.default",
                       {ref("x"), 2, ref("p_w"), ref("p_b"), 1e-5, false}, {2, 8, 5}),
                  node("mean", "aten.mean.dim", {ref("gn"), {2}}, {2, 8})},
                 {"mean"}));
  EXPECT_TRUE(rewrite_graph(&g).empty());  // its output's shape has no groups to flatten back
}

/// smooth_l1_loss of broadcast_tensors([pred, target]) as torch.export records F.smooth_l1_loss,
/// target of shape target_shape, then a mean over the last dim.
Graph broadcast_loss(const std::vector<int>& target_shape) {
  json pair = json::array({testing::ref("pred"), testing::ref("target")});
  return read(
      graph({tensor_input("pred", "input", {8, 16}), tensor_input("target", "input", target_shape)},
            {node("bt", "aten.broadcast_tensors.default", json::array({pair}), {{8, 16}, {8, 16}},
                  {"float32", "float32"}),
             node("g0", "operator.getitem", {ref("bt"), 0}, {8, 16}),
             node("g1", "operator.getitem", {ref("bt"), 1}, {8, 16}),
             node("loss", "aten.smooth_l1_loss.default", {ref("g0"), ref("g1"), 0}, {8, 16}),
             node("mean", "aten.mean.dim", {ref("loss"), {1}}, {8})},
            {"mean"}));
}

TEST(SynthRewrite, ABroadcastThatLeavesATensorAsItIsIsReadThrough) {
  Graph g = broadcast_loss({8, 16});
  auto applied = rewrite_graph(&g);
  ASSERT_FALSE(applied.empty());
  EXPECT_EQ(applied[0].name, "identity_broadcast");
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"smooth_l1_loss", "mean"}));
  EXPECT_EQ(g.values[g.ops[0].inputs[0]].name, "pred");
  EXPECT_EQ(g.values[g.ops[0].inputs[1]].name, "target");
  EXPECT_EQ(g.ops[0].args[1]["ref"], "target");
}

TEST(SynthRewrite, ABroadcastThatExpandsATensorIsLeftAlone) {
  Graph g = broadcast_loss({1, 16});
  int read_through = 0;
  for (const auto& a : rewrite_graph(&g)) read_through += a.name == "identity_broadcast";
  EXPECT_EQ(read_through, 1);  // pred's getitem only: target's is expanded
  const Op& loss = g.ops[g.ops.size() - 2];
  EXPECT_EQ(g.values[loss.inputs[0]].name, "pred");
  EXPECT_EQ(g.values[loss.inputs[1]].name, "g1");
}

/// 1 - cosine_similarity(x1, x2, dim) of two (rows, cols) tensors, x2's shape as given.
Graph cosine_loss(int rows, int cols, json x2_shape, json dim) {
  json args = {ref("x1"), ref("x2")};
  if (!dim.is_null()) args.push_back(dim);
  const int out = dim == 0 ? cols : rows;
  return read(
      graph({tensor_input("x1", "input", {rows, cols}), tensor_input("x2", "input", x2_shape)},
            {node("cos", "aten.cosine_similarity.default", args, {out}),
             node("rsub", "aten.rsub.Scalar", {ref("cos"), 1.0}, {out})},
            {"rsub"}));
}

TEST(SynthRewrite, CosineSimilarityIsADotProductOverClampedNormsOfOneRow) {
  for (auto [rows, cols] : {std::pair{64, 512}, std::pair{5, 3}}) {  // a perturbed shape too
    Graph g = cosine_loss(rows, cols, {rows, cols}, nullptr);
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "distance");
    EXPECT_EQ(op_names(g),
              (std::vector<std::string>{"mul", "sum", "linalg_vector_norm", "clamp_min",
                                        "linalg_vector_norm", "clamp_min", "mul", "div", "rsub"}));
    // Every reduction is over dim 1, torch's default, and its eps is torch's.
    EXPECT_EQ(g.ops[1].args[1], json::array({1}));
    EXPECT_EQ(g.ops[2].args[2], json::array({1}));
    EXPECT_EQ(g.ops[3].args[1], 1e-8);
    // The division makes the similarity's own value, which the rsub still reads.
    EXPECT_EQ(g.values[g.ops[7].value].name, "cos");
    EXPECT_EQ(g.values[g.ops[7].value].results[0].shape, (std::vector<std::int64_t>{rows}));
    // One pass over each pair of rows: the dot product and both squared norms together.
    RowPlan plan;
    Status s = plan_rows(g, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(plan.passes, 1);
    EXPECT_EQ(plan.accumulators.size(), 3u);
  }
  Graph over_rows = cosine_loss(6, 4, {6, 4}, -2);
  rewrite_graph(&over_rows);
  EXPECT_EQ(over_rows.ops[1].args[1], json::array({0}));
  EXPECT_EQ(over_rows.values[over_rows.ops[1].value].results[0].shape,
            (std::vector<std::int64_t>{4}));
}

TEST(SynthRewrite, ACosineSimilarityOfABroadcastIsLeftAlone) {
  // x2 of one row against every row of x1: the norm of x2 would be taken before the broadcast.
  Graph g = cosine_loss(8, 16, {1, 16}, nullptr);
  rewrite_graph(&g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"cosine_similarity", "rsub"}));
}

TEST(SynthRewrite, TripletMarginLossIsTwoPairwiseDistancesAndAHinge) {
  auto triplet = [](bool swap, int reduction) {
    json inputs = json::array();
    for (const char* n : {"a", "p", "n"}) inputs.push_back(tensor_input(n, "input", {32, 7}));
    return read(graph(inputs,
                      {node("loss", "aten.triplet_margin_loss.default",
                            {ref("a"), ref("p"), ref("n"), 0.5, 2.0, 1e-6, swap, reduction},
                            reduction == 0 ? json::array({32}) : json::array())},
                      {"loss"}));
  };
  Graph g = triplet(false, 0);
  rewrite_graph(&g);
  EXPECT_EQ(op_names(g),
            (std::vector<std::string>{"sub", "add", "linalg_vector_norm", "sub", "add",
                                      "linalg_vector_norm", "add", "sub", "clamp_min"}));
  EXPECT_EQ(g.ops[1].args[1], 1e-6);              // eps on each difference
  EXPECT_EQ(g.ops[2].args[2], json::array({1}));  // the last dim
  EXPECT_EQ(g.ops[6].args[1], 0.5);               // the margin
  EXPECT_EQ(g.values[g.outputs[0]].name, "loss");

  Graph swapped = triplet(true, 1);  // d(p, n) may be the nearer negative; then the mean
  rewrite_graph(&swapped);
  const std::vector<std::string> names = op_names(swapped);
  EXPECT_EQ(std::count(names.begin(), names.end(), "linalg_vector_norm"), 3);
  EXPECT_EQ(names[names.size() - 3], "sub");
  EXPECT_EQ(names.back(), "mean");
  EXPECT_NE(std::find(names.begin(), names.end(), "minimum"), names.end());
}

/// F.cross_entropy(logits, targets, reduction="none") of (rows, classes) logits.
json per_sample_cross_entropy(int rows, int classes, json reduction = 0) {
  json targets = tensor_input("targets", "input", {rows});
  targets["dtype"] = "int64";
  return graph({tensor_input("logits", "input", {rows, classes}), targets},
               {node("loss", "aten.cross_entropy_loss.default",
                     {ref("logits"), ref("targets"), nullptr, reduction}, {rows})},
               {"loss"});
}

TEST(SynthRewrite, CrossEntropyIsEachRowsLogsumexpLessTheLogitAtItsTarget) {
  for (auto [rows, classes] : {std::pair{64, 1000}, std::pair{3, 7}}) {  // a perturbed shape too
    Graph g = read(per_sample_cross_entropy(rows, classes));
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "cross_entropy");
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"logsumexp", "arange", "eq", "where", "sum",
                                                     "sub", "eq", "where", "squeeze"}));
    // The targets are read as a column: a view ModelNew makes, not an op.
    EXPECT_EQ(value_expression(g.values[g.ops[2].inputs[1]]), "targets.unsqueeze(1)");
    EXPECT_EQ(g.ops[6].args[1], -100);  // torch's default ignore_index
    EXPECT_EQ(g.values[g.outputs[0]].name, "loss");
    // One pass over each row: the logsumexp and the picked logit together.
    RowPlan plan;
    Status s = plan_rows(g, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(plan.passes, 1);
    EXPECT_EQ(plan.accumulators.size(), 2u);
    ASSERT_EQ(plan.inputs.size(), 2u);
    EXPECT_EQ(plan.inputs[1].dtype, "int64");
    EXPECT_FALSE(plan.inputs[1].per_element);  // one target a row
  }
}

TEST(SynthRewrite, AReducedCrossEntropyIsLeftAlone) {
  Graph g = read(per_sample_cross_entropy(8, 10, 1));  // the mean: torch's default
  g.values[g.outputs[0]].results[0].shape = {};
  rewrite_graph(&g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"cross_entropy_loss"}));
}

TEST(SynthRewrite, AProductWithAVectorIsASumOfProductsAlongTheRows) {
  for (auto [m, k] : {std::pair{64, 512}, std::pair{5, 3}}) {  // a perturbed shape too
    Graph g = read(graph({tensor_input("a", "input", {2, m, k}), tensor_input("v", "input", {k})},
                         {node("matmul", "aten.matmul.default", {ref("a"), ref("v")}, {2, m})},
                         {"matmul"}));
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "matrix_vector");
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"mul", "sum"}));
    EXPECT_EQ(g.values[g.ops[0].value].results[0].dtype, "float32");
    EXPECT_EQ(g.ops[1].args[1], json::array({-1}));
    RowPlan plan;
    Status s = plan_rows(g, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(plan.passes, 1);
  }
  // v @ A: v as a column (a view ModelNew makes), the sum down the columns.
  Graph left =
      read(graph({tensor_input("v", "input", {6}), tensor_input("a", "input", {6, 9})},
                 {node("matmul", "aten.matmul.default", {ref("v"), ref("a")}, {9})}, {"matmul"}));
  rewrite_graph(&left);
  EXPECT_EQ(op_names(left), (std::vector<std::string>{"mul", "sum"}));
  EXPECT_EQ(value_expression(left.values[left.ops[0].inputs[1]]), "v.unsqueeze(-1)");
  EXPECT_EQ(left.ops[1].args[1], json::array({-2}));
}

/// A recurrence's input projection: linear(x.select(dim, t), w, b) for each t in `steps`, each
/// chunked in three and its first third added to the state h, the new state the next step's;
/// every step's state is an output.
Graph projected_steps(int batch, int length, int features, int out, int dim,
                      const std::vector<int>& steps) {
  std::vector<int> x_shape = {batch, length, features};
  std::vector<int> row = x_shape;
  row.erase(row.begin() + dim);
  json nodes = json::array(), outputs = json::array();
  std::string state = "h";
  for (int t : steps) {
    const std::string n = std::to_string(t);
    std::vector<int> projected = row;
    projected.back() = out;
    nodes.push_back(node("select" + n, "aten.select.int", {ref("x"), dim, t}, row));
    nodes.push_back(node("linear" + n, "aten.linear.default",
                         {synth::testing::ref("select" + n), ref("p_w"), ref("p_b")}, projected));
    std::vector<int> third = projected;
    third.back() = out / 3;
    nodes.push_back(
        node("chunk" + n, "aten.chunk.default", {synth::testing::ref("linear" + n), 3, -1},
             json::array({third, third, third}), json::array({"float32", "float32", "float32"})));
    nodes.push_back(
        node("first" + n, "operator.getitem", {synth::testing::ref("chunk" + n), 0}, third));
    nodes.push_back(node("h" + n, "aten.add.Tensor",
                         {synth::testing::ref("first" + n), synth::testing::ref(state)}, third));
    state = "h" + n;
    outputs.push_back(state);
  }
  std::vector<int> state_shape = row;
  state_shape.back() = out / 3;
  return read(graph({tensor_input("x", "input", x_shape), tensor_input("h", "input", state_shape),
                     tensor_input("p_w", "parameter", {out, features}, "w"),
                     tensor_input("p_b", "parameter", {out}, "b")},
                    nodes, outputs));
}

TEST(SynthRewrite, LinearsOfEverySliceAlongADimAreOneLinearOfTheWhole) {
  for (auto [batch, length, features, out] :
       {std::tuple{32, 4, 64, 96}, std::tuple{5, 3, 7, 9}}) {  // a perturbed shape too
    std::vector<int> steps(length);
    for (int t = 0; t < length; ++t) steps[t] = length - 1 - t;  // in any order
    Graph g = projected_steps(batch, length, features, out, 1, steps);
    auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "slice_linears") << applied[0].detail;
    std::vector<const Op*> linears, unbinds, pieces;
    for (const Op& op : g.ops) {
      if (op.name == "linear") linears.push_back(&op);
      if (op.name == "select") ADD_FAILURE() << "a select of the whole for each step";
      if (op.name == "unbind") unbinds.push_back(&op);
    }
    // One unbind, along the steps' dim, of one GEMM of every slice's rows, before any step
    // reads a piece of it; the GEMM of a task input runs in the library as a view of it, and
    // its bias joins the additions that read its pieces.
    ASSERT_EQ(unbinds.size(), 1u);
    const Value& whole = g.values[unbinds[0]->inputs[0]];
    EXPECT_EQ(whole.results[0].shape, (std::vector<std::int64_t>{batch, length, out}));
    EXPECT_TRUE(linears.empty());
    EXPECT_EQ(whole.view, "torch.nn.functional.linear(x, self.w)");
    ASSERT_GE(applied.size(), 2u);
    EXPECT_EQ(applied[1].name, "linear_bias") << applied[1].detail;
    EXPECT_EQ(g.values[unbinds[0]->value].results.size(), static_cast<std::size_t>(length));
    for (const Op& op : g.ops) {
      if (op.name == "getitem" && op.inputs[0] == unbinds[0]->value) pieces.push_back(&op);
    }
    ASSERT_FALSE(pieces.empty());
    EXPECT_LT(unbinds[0] - g.ops.data(), pieces[0] - g.ops.data());
    ASSERT_EQ(pieces.size(), static_cast<std::size_t>(length));
    for (const Op* piece : pieces) {
      // Each step reads its slice of the whole, rows length * out apart, and so do its chunks.
      const Value& slice = g.values[piece->value];
      EXPECT_EQ(slice.results[0].stride, (std::vector<std::int64_t>{length * out, 1}));
      const std::string t = slice.name.substr(std::string("linear").size());
      const Value& first = g.values[g.find("first" + t)];
      EXPECT_EQ(first.results[0].stride, (std::vector<std::int64_t>{length * out, 1}));
    }
    EXPECT_EQ(g.values[g.outputs.back()].name, "h" + std::to_string(steps.back()));
  }
}

TEST(SynthRewrite, LinearsOfSomeSlicesOrOfFeatureSlicesAreLeftAlone) {
  const auto linears = [](const Graph& g) {
    return std::count_if(g.ops.begin(), g.ops.end(),
                         [](const Op& op) { return op.name == "linear"; });
  };
  Graph part = projected_steps(8, 4, 16, 12, 1, {0, 1, 3});  // slice 2 is nobody's
  rewrite_graph(&part);
  EXPECT_EQ(linears(part), 3);
  Graph one = projected_steps(8, 1, 16, 12, 1, {0});  // a single slice: nothing to gather
  rewrite_graph(&one);
  EXPECT_EQ(linears(one), 1);
  // Slices of the features (x is (8, 6, 6): its last dim's slices are rows of length 6 too)
  // are no rows of one GEMM.
  Graph features = projected_steps(8, 6, 6, 12, 2, {0, 1, 2, 3, 4, 5});
  rewrite_graph(&features);
  EXPECT_EQ(linears(features), 6);
}

/// zeros_like(x) op'd with x * x (zeros first unless swapped), then a relu; zeros of shape
/// `zeros` (x's unless given, a broadcast of x's otherwise), the sum of the two's broadcast.
Graph zero_sum(int rows, int cols, const std::string& op, bool swapped,
               std::vector<int> zeros = {}) {
  const std::vector<int> shape = {rows, cols};
  const bool own = zeros.empty();
  if (own) zeros = shape;
  json zeros_node = own ? node("zeros", "aten.zeros_like.default", {ref("x")}, zeros)
                        : node("zeros", "aten.zeros.default", {zeros}, zeros);
  json sum_args = swapped ? json::array({ref("square"), ref("zeros")})
                          : json::array({ref("zeros"), ref("square")});
  return read(graph({tensor_input("x", "input", shape)},
                    {zeros_node, node("square", "aten.mul.Tensor", {ref("x"), ref("x")}, shape),
                     node("sum", "aten." + op + ".Tensor", sum_args, zeros),
                     node("relu", "aten.relu.default", {ref("sum")}, zeros)},
                    {"relu"}));
}

/// relu(x) (so that the linear reads an op's result and stays an op), a linear of it with a
/// bias chunked in three along `dim`, and its pieces read by sigmoid(p0) * tanh(p1) + p2 (or
/// `last` for the third piece's op).
Graph gated_linear(int batch, int features, int out, int dim, const std::string& dtype = "float32",
                   const std::string& last = "aten.add.Tensor") {
  const std::vector<int> projected = {batch, out};
  std::vector<int> third = projected;
  third[(dim + 2) % 2] /= 3;
  json input = tensor_input("x", "input", {batch, features});
  json w = tensor_input("p_w", "parameter", {out, features}, "w");
  json b = tensor_input("p_b", "parameter", {out}, "b");
  for (json* t : {&input, &w, &b}) (*t)["dtype"] = dtype;
  json nodes =
      json::array({node("relu", "aten.relu.default", {ref("x")}, {batch, features}, dtype),
                   node("linear", "aten.linear.default", {ref("relu"), ref("p_w"), ref("p_b")},
                        projected, dtype),
                   node("chunk", "aten.chunk.default", {ref("linear"), 3, dim},
                        json::array({third, third, third}), json::array({dtype, dtype, dtype})),
                   node("p0", "operator.getitem", {ref("chunk"), 0}, third, dtype),
                   node("p1", "operator.getitem", {ref("chunk"), 1}, third, dtype),
                   node("p2", "operator.getitem", {ref("chunk"), 2}, third, dtype),
                   node("gate", "aten.sigmoid.default", {ref("p0")}, third, dtype),
                   node("cell", "aten.tanh.default", {ref("p1")}, third, dtype),
                   node("product", "aten.mul.Tensor", {ref("gate"), ref("cell")}, third, dtype)});
  if (last == "aten.add.Tensor") {
    nodes.push_back(node("out", last, {ref("product"), ref("p2")}, third, dtype));
  } else {  // the third piece reduced over its rows, then added
    std::vector<int> row = third;
    row[0] = 1;
    nodes.push_back(node("reduced", last, {ref("p2"), json::array({0}), true}, row, dtype));
    nodes.push_back(node("out", "aten.add.Tensor", {ref("product"), ref("reduced")}, third, dtype));
  }
  return read(graph({input, w, b}, nodes, {"out"}));
}

TEST(SynthRewrite, ALinearsBiasJoinsTheElementwiseOpsThatReadItsPieces) {
  for (auto [batch, features, out] : {std::tuple{16, 32, 48}, std::tuple{5, 7, 9}}) {  // perturbed
    Graph g = gated_linear(batch, features, out, -1);
    const auto applied = rewrite_graph(&g);
    ASSERT_FALSE(applied.empty());
    EXPECT_EQ(applied[0].name, "linear_bias") << applied[0].detail;
    // The GEMM without its bias: a plain mm for the library.
    const Op* linear = nullptr;
    for (const Op& op : g.ops) linear = op.name == "linear" ? &op : linear;
    ASSERT_NE(linear, nullptr);
    EXPECT_TRUE(linear->args[2].is_null());
    EXPECT_EQ(linear->inputs.size(), 2u);
    // The bias in the same three pieces, along its one dim, made before anything reads them.
    const int bias = g.find("p_b");
    const Op* bias_chunk = nullptr;
    for (const Op& op : g.ops)
      bias_chunk = op.name == "chunk" && op.inputs[0] == bias ? &op : bias_chunk;
    ASSERT_NE(bias_chunk, nullptr);
    EXPECT_EQ(bias_chunk->args[1], 3);
    EXPECT_EQ(bias_chunk->args[2], 0);
    EXPECT_EQ(g.values[bias_chunk->value].results[0].shape, (std::vector<std::int64_t>{out / 3}));
    // Each piece k of the GEMM's result gains the bias's piece k, and its reader reads the sum.
    for (const char* piece : {"p0", "p1", "p2"}) {
      const int p = g.find(piece);
      const Op* add = nullptr;
      for (const Op& op : g.ops) add = op.name == "add" && op.inputs[0] == p ? &op : add;
      ASSERT_NE(add, nullptr) << piece;
      const Op& item = g.ops[g.values[add->inputs[1]].op];
      EXPECT_EQ(item.name, "getitem");
      EXPECT_EQ(item.inputs[0], bias_chunk->value);
      EXPECT_EQ(item.args[1], g.ops[g.values[p].op].args[1]) << piece;
      EXPECT_LT(g.values[p].op, g.values[add->value].op);
      std::size_t readers_of_piece = 0;
      for (const Op& op : g.ops) {
        if (&op != add && std::count(op.inputs.begin(), op.inputs.end(), p)) ++readers_of_piece;
      }
      EXPECT_EQ(readers_of_piece, 0u) << piece << " is read past its bias";
    }
  }
}

TEST(SynthRewrite, ALinearWhosePiecesAReductionReadsOrOf16BitsKeepsItsBias) {
  const auto keeps_bias = [](Graph g) {
    rewrite_graph(&g);
    for (const Op& op : g.ops) {
      if (op.name == "linear") return !op.args[2].is_null();
    }
    return false;
  };
  EXPECT_TRUE(keeps_bias(gated_linear(16, 32, 48, -1, "float16")));
  EXPECT_TRUE(keeps_bias(gated_linear(16, 32, 48, -1, "float32", "aten.sum.dim_IntList")));
  EXPECT_FALSE(keeps_bias(gated_linear(16, 32, 48, -1)));
}

TEST(SynthRewrite, ASumWithZerosIsTheOtherOperandItself) {
  for (auto [rows, cols] : {std::pair{64, 48}, std::pair{5, 3}}) {  // a perturbed shape too
    for (auto [op, swapped] :
         {std::pair{"add", false}, std::pair{"add", true}, std::pair{"sub", true}}) {
      Graph g = zero_sum(rows, cols, op, swapped);
      auto applied = rewrite_graph(&g);
      ASSERT_FALSE(applied.empty());
      EXPECT_EQ(applied[0].name, "zero_sum");
      EXPECT_EQ(op_names(g), (std::vector<std::string>{"mul", "relu"}));  // no zeros, no sum
      EXPECT_EQ(g.values[g.ops[1].inputs[0]].name, "square");
    }
  }
}

TEST(SynthRewrite, ZerosLessATensorOrZerosThatBroadcastItAreLeftAlone) {
  Graph negated = zero_sum(8, 4, "sub", /*swapped=*/false);  // 0 - y is -y
  rewrite_graph(&negated);
  EXPECT_EQ(op_names(negated), (std::vector<std::string>{"zeros_like", "mul", "sub", "relu"}));
  Graph broadcast = zero_sum(8, 4, "add", false, {2, 8, 4});  // the sum is larger than y
  rewrite_graph(&broadcast);
  EXPECT_EQ(op_names(broadcast), (std::vector<std::string>{"zeros", "mul", "add", "relu"}));
}

}  // namespace
}  // namespace cuda_agent::synth
