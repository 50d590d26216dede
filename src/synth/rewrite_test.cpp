#include "synth/rewrite.h"

#include <gtest/gtest.h>

#include "synth/graph_test_util.h"
#include "synth/model_source.h"

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

}  // namespace
}  // namespace cuda_agent::synth

namespace cuda_agent::synth {
namespace {

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

}  // namespace
}  // namespace cuda_agent::synth
