#include "synth/scan_plan.h"

#include <gtest/gtest.h>

#include "synth/graph_test_util.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// cumsum(x * w, -1) / arange(1, cols + 1): a running mean of x scaled by a per-column weight.
json running_mean(int rows, int cols) {
  json arange = node("arange", "aten.arange.start", {1, cols + 1}, {cols});
  arange["kwargs"] = {{"dtype", "torch.float32"}};
  return graph(
      {tensor_input("x", "input", {rows, cols}), tensor_input("p_w", "parameter", {cols}, "w")},
      {arange, node("mul", "aten.mul.Tensor", {ref("x"), ref("p_w")}, {rows, cols}),
       node("cumsum", "aten.cumsum.default", {ref("mul"), -1}, {rows, cols}),
       node("div", "aten.div.Tensor", {ref("cumsum"), ref("arange")}, {rows, cols})},
      {"div"});
}

TEST(SynthScanPlan, ARunningMeanIsOneScanWithItsCountsAsPositions) {
  ScanPlan plan;
  Status s = plan_scan(read(running_mean(8, 100)), &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.axis, 1);
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"mul", "cumsum", "div"}));
  ASSERT_EQ(plan.inputs.size(), 2u);  // x and w, read before the scan; arange is no tensor
  EXPECT_FALSE(plan.inputs[0].after);
  EXPECT_EQ(plan.before, (std::vector<std::string>{"const float b0 = (in0 * in1);"}));
  EXPECT_EQ(plan.scanned, "b0");
  EXPECT_EQ(
      plan.after,
      (std::vector<std::string>{"const float a0 = sa_div(scanned, (1.0f + 1.0f * (float)k));"}));
  for (const char* device : {"cpu", "cuda"}) {
    const std::string source = scan_kernel_source(plan, device);
    EXPECT_NE(source.find("extern \"C\" int fused_scan("), std::string::npos) << device;
    // Along the scanned dim (the last of 6), each input steps by its stride there.
    EXPECT_NE(source.find("in0_data[b0 + k * in0_t5]"), std::string::npos) << device;
  }
  EXPECT_NE(scan_kernel_source(plan, "cuda").find("__shfl_up_sync"), std::string::npos);
}

TEST(SynthScanPlan, ACumulativeProductIsTheSameScanWithProductsFromOne) {
  Graph g = read(graph({tensor_input("x", "input", {4, 50, 6})},
                       {node("cumprod", "aten.cumprod.default", {ref("x"), 1}, {4, 50, 6})},
                       {"cumprod"}));
  ScanPlan plan;
  Status s = plan_scan(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(plan.product);
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"cumprod"}));
  for (const char* device : {"cpu", "cuda"}) {
    const std::string source = scan_kernel_source(plan, device);
    EXPECT_NE(source.find("{ return a * b; }"), std::string::npos) << device;
    EXPECT_NE(source.find("#define SA_IDENTITY 1.0f"), std::string::npos) << device;
  }
  ScanPlan sum;
  ASSERT_TRUE(plan_scan(read(running_mean(8, 100)), &sum).ok());
  EXPECT_FALSE(sum.product);
  EXPECT_NE(scan_kernel_source(sum, "cuda").find("{ return a + b; }"), std::string::npos);
}

/// cumsum(flip(x, flip_dims), 1), flipped back along back_dims (none: not flipped back).
json flipped_scan(json flip_dims, json back_dims) {
  std::vector<json> ops = {node("flip", "aten.flip.default", {ref("x"), flip_dims}, {4, 50, 6}),
                           node("cumsum", "aten.cumsum.default", {ref("flip"), 1}, {4, 50, 6})};
  if (!back_dims.is_null()) {
    ops.push_back(node("back", "aten.flip.default", {ref("cumsum"), back_dims}, {4, 50, 6}));
  }
  return graph({tensor_input("x", "input", {4, 50, 6})}, ops,
               {back_dims.is_null() ? "cumsum" : "back"});
}

TEST(SynthScanPlan, AScanBetweenAFlipAndAFlipBackWalksEachRowFromItsEnd) {
  ScanPlan plan;
  Status s = plan_scan(read(flipped_scan({1}, {-2})), &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(plan.reverse);
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"flip", "cumsum", "flip"}));
  EXPECT_EQ(plan.inputs.size(), 1u);  // x, read where it lies: the flips are no passes
  for (const char* device : {"cpu", "cuda"}) {
    EXPECT_NE(scan_kernel_source(plan, device).find("#define SA_AT(kl) (R - 1 - (kl))"),
              std::string::npos);
  }
  // Not flipped back, flipped back along another dim, or flipped along two: no plan.
  for (const json& g :
       {flipped_scan({1}, nullptr), flipped_scan({1}, {2}), flipped_scan({1, 2}, {1, 2})}) {
    s = plan_scan(read(g), &plan);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("flip"), std::string::npos) << s.message();
  }
}

TEST(SynthScanPlan, ThePlanDoesNotDependOnTheSizes) {
  ScanPlan a, b;
  ASSERT_TRUE(plan_scan(read(running_mean(8, 100)), &a).ok());
  ASSERT_TRUE(plan_scan(read(running_mean(3, 7)), &b).ok());
  for (const char* device : {"cpu", "cuda"})
    EXPECT_EQ(scan_kernel_source(a, device), scan_kernel_source(b, device));
}

TEST(SynthScanPlan, AScanOverAMiddleDimStepsByThatDimsStride) {
  Graph g =
      read(graph({tensor_input("x", "input", {4, 50, 6})},
                 {node("cumsum", "aten.cumsum.default", {ref("x"), 1}, {4, 50, 6})}, {"cumsum"}));
  ScanPlan plan;
  ASSERT_TRUE(plan_scan(g, &plan).ok());
  EXPECT_EQ(plan.axis, 1);
  EXPECT_EQ(plan.result, "scanned");
  // F (4, 50, 6) is dims 3..5 of six; the scanned one is dim 4.
  EXPECT_NE(scan_kernel_source(plan, "cpu").find("in0_data[b0 + k * in0_t4]"), std::string::npos);
}

/// cumsum(x, dim) of an x of the given shape.
Graph plain_scan(const std::vector<int>& shape, int dim) {
  json sizes = shape;
  return read(graph({tensor_input("x", "input", sizes)},
                    {node("cumsum", "aten.cumsum.default", {ref("x"), dim}, sizes)}, {"cumsum"}));
}

TEST(SynthScanPlan, RowsSideBySideInMemoryAreScannedALaneARowOnCuda) {
  // 8 elements or more after the scanned dim: neighbouring rows are neighbours in memory.
  for (const auto& [shape, dim] : std::vector<std::pair<std::vector<int>, int>>{
           {{4, 50, 8}, 1}, {{3, 17, 9}, 1}, {{2, 5, 3, 4}, 1}, {{64, 2, 4}, 0}}) {
    ScanPlan plan;
    ASSERT_TRUE(plan_scan(plain_scan(shape, dim), &plan).ok());
    EXPECT_TRUE(plan.across) << shape[0] << " " << dim;
    const std::string source = scan_kernel_source(plan, "cuda");
    EXPECT_NE(source.find("totals[warp][lane] = v[V - 1];"), std::string::npos);
    EXPECT_EQ(source.find("sa_padded"), std::string::npos);
    Candidate candidate;
    ASSERT_TRUE(synthesize_scan(plain_scan(shape, dim), "cuda", &candidate).ok());
    EXPECT_EQ(candidate.configs.front().label, "32 rows x 8 warps x 8 a row");
  }
  // The last dim, or fewer than 8 elements after the scanned one: a block a row.
  ScanPlan across, along;
  for (const auto& [shape, dim] : std::vector<std::pair<std::vector<int>, int>>{
           {{4, 50, 6}, 1}, {{4, 50, 8}, 2}, {{4, 50, 8}, -1}, {{300}, 0}, {{2, 9, 1}, 1}}) {
    ASSERT_TRUE(plan_scan(plain_scan(shape, dim), &along).ok());
    EXPECT_FALSE(along.across) << shape[0] << " " << dim;
    EXPECT_NE(scan_kernel_source(along, "cuda").find("sa_padded"), std::string::npos);
  }
  // The CPU's kernel walks a row a thread either way.
  ASSERT_TRUE(plan_scan(plain_scan({4, 50, 8}, 1), &across).ok());
  ASSERT_TRUE(plan_scan(plain_scan({4, 50, 6}, 1), &along).ok());
  EXPECT_EQ(scan_kernel_source(across, "cpu"), scan_kernel_source(along, "cpu"));
}

TEST(SynthScanPlan, WhatThePlanCannotTakeIsNamed) {
  ScanPlan plan;
  // Positions along another dim than the scanned one.
  json across = running_mean(8, 100);
  across["nodes"][2]["args"][1] = 0;
  Status s = plan_scan(read(across), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("aten.arange.start does not run along the scanned dim"),
            std::string::npos)
      << s.message();
  // int64 positions: the kernel computes in float.
  json integers = running_mean(8, 100);
  integers["nodes"][0]["dtype"] = "int64";
  s = plan_scan(read(integers), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("makes int64 positions"), std::string::npos) << s.message();
  // No cumulative sum at all.
  Graph none = read(graph({tensor_input("x", "input", {4})},
                          {node("relu", "aten.relu.default", {ref("x")}, {4})}, {"relu"}));
  s = plan_scan(none, &plan);
  EXPECT_NE(s.message().find("no cumulative sum"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::synth
