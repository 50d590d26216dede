#include "synth/pool_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "sandbox/process_runner.h"
#include "synth/graph_test_util.h"
#include "util/files.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// sigmoid(max_pool2d(relu(x + bias), 3, 2, 1)) of x (n, c, h, w) and a per-channel bias.
json bias_relu_maxpool_sigmoid(int n, int c, int h, int w) {
  const int oh = (h + 2 - 3) / 2 + 1, ow = (w + 2 - 3) / 2 + 1;
  return graph({tensor_input("x", "input", {n, c, h, w}),
                tensor_input("p_bias", "parameter", {c, 1, 1}, "bias")},
               {node("add", "aten.add.Tensor", {ref("x"), ref("p_bias")}, {n, c, h, w}),
                node("relu", "aten.relu.default", {ref("add")}, {n, c, h, w}),
                node("pool", "aten.max_pool2d.default", {ref("relu"), {3, 3}, {2, 2}, {1, 1}},
                     {n, c, oh, ow}),
                node("sigmoid", "aten.sigmoid.default", {ref("pool")}, {n, c, oh, ow})},
               {"sigmoid"});
}

TEST(SynthPoolPlan, OpsBeforeThePoolingRunOnEachElementReadAndOpsAfterOnEachOutput) {
  PoolPlan plan;
  Status s = plan_pool(read(bias_relu_maxpool_sigmoid(4, 8, 32, 32)), &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.kind, "max");
  EXPECT_EQ(plan.spatial, 2);
  EXPECT_EQ(plan.leading, 2);
  EXPECT_EQ(plan.kernel, (std::vector<std::int64_t>{1, 3, 3}));  // (D, H, W)
  EXPECT_EQ(plan.stride, (std::vector<std::int64_t>{1, 2, 2}));
  EXPECT_EQ(plan.padding, (std::vector<std::int64_t>{0, 1, 1}));
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"add", "relu", "max_pool2d", "sigmoid"}));
  ASSERT_EQ(plan.inputs.size(), 2u);  // x and the bias, both read at the windows' elements
  EXPECT_FALSE(plan.inputs[0].after);
  EXPECT_FALSE(plan.inputs[1].after);
  EXPECT_EQ(plan.before, (std::vector<std::string>{"const float b0 = (in0 + in1);",
                                                   "const float b1 = sa_max(b0, 0.0f);"}));
  EXPECT_EQ(plan.pooled, "b1");
  ASSERT_EQ(plan.after.size(), 1u);
  EXPECT_NE(plan.after[0].find("expf(-pooled)"), std::string::npos) << plan.after[0];
  for (const char* device : {"cpu", "cuda"}) {
    const std::string source = pool_kernel_source(plan, device);
    // torch's maximum: a larger value or a NaN replaces it.
    EXPECT_NE(source.find("if (b1 > acc[j] || b1 != b1) acc[j] = b1;"), std::string::npos);
    EXPECT_NE(source.find("extern \"C\" int fused_pool("), std::string::npos) << device;
  }
}

TEST(SynthPoolPlan, ThePlanDoesNotDependOnTheSizes) {
  PoolPlan a, b;
  ASSERT_TRUE(plan_pool(read(bias_relu_maxpool_sigmoid(4, 8, 32, 32)), &a).ok());
  ASSERT_TRUE(plan_pool(read(bias_relu_maxpool_sigmoid(1, 3, 7, 5)), &b).ok());
  for (const char* device : {"cpu", "cuda"})
    EXPECT_EQ(pool_kernel_source(a, device), pool_kernel_source(b, device));
}

TEST(SynthPoolPlan, AnAverageCountsThePaddingOrNotAndCeilModeIsTorchs) {
  auto avg = [](bool include_pad, json divisor) {
    return read(
        graph({tensor_input("x", "input", {2, 3, 9, 9})},
              {node("pool", "aten.avg_pool2d.default",
                    {ref("x"), {3, 3}, {2, 2}, {1, 1}, true, include_pad, divisor}, {2, 3, 5, 5})},
              {"pool"}));
  };
  PoolPlan with, without, divided;
  ASSERT_TRUE(plan_pool(avg(true, nullptr), &with).ok());
  ASSERT_TRUE(plan_pool(avg(false, nullptr), &without).ok());
  ASSERT_TRUE(plan_pool(avg(false, 5), &divided).ok());
  EXPECT_TRUE(with.ceil_mode);
  // The window's size against the padded input, or clipped again to the input.
  const std::string window = "acc[j] / (float)((d1 - d0) * (h1 - h0) * (w1 - w0))";
  const std::string clip = "w0 = w0 > 0 ? w0 : 0;";
  EXPECT_NE(pool_kernel_source(with, "cpu").find(window), std::string::npos);
  EXPECT_EQ(pool_kernel_source(with, "cpu").find(clip), std::string::npos);
  EXPECT_NE(pool_kernel_source(without, "cpu").find(window), std::string::npos);
  EXPECT_NE(pool_kernel_source(without, "cpu").find(clip), std::string::npos);
  EXPECT_NE(pool_kernel_source(divided, "cpu").find("acc[j] / (float)(5)"), std::string::npos);
  EXPECT_NE(pool_model_source(avg(true, nullptr), with).find("CEIL_MODE = True"),
            std::string::npos);
}

TEST(SynthPoolPlan, AnUnbatchedAdaptivePoolingHasOneLeadingDim) {
  Graph g = read(graph({tensor_input("x", "input", {16, 100})},
                       {node("pool", "aten.adaptive_avg_pool1d.default", {ref("x"), {7}}, {16, 7})},
                       {"pool"}));
  PoolPlan plan;
  Status s = plan_pool(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.kind, "adaptive_avg");
  EXPECT_EQ(plan.leading, 1);
  EXPECT_EQ(plan.output_size, (std::vector<std::int64_t>{1, 1, 7}));
  EXPECT_NE(pool_kernel_source(plan, "cuda").find("((ow + 1) * IW + OW - 1) / OW"),
            std::string::npos);
}

TEST(SynthPoolPlan, WhatThePlanCannotTakeIsNamed) {
  // Two poolings; an op after the pooling that reads a value from before it.
  Graph twice =
      read(graph({tensor_input("x", "input", {2, 3, 8, 8})},
                 {node("p0", "aten.max_pool2d.default", {ref("x"), {2, 2}}, {2, 3, 4, 4}),
                  node("p1", "aten.max_pool2d.default", {ref("p0"), {2, 2}}, {2, 3, 2, 2})},
                 {"p1"}));
  PoolPlan plan;
  Status s = plan_pool(twice, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("it pools twice"), std::string::npos) << s.message();

  Graph across =
      read(graph({tensor_input("x", "input", {2, 3, 8, 8})},
                 {node("relu", "aten.relu.default", {ref("x")}, {2, 3, 8, 8}),
                  node("pool", "aten.avg_pool2d.default", {ref("relu"), {2, 2}}, {2, 3, 4, 4}),
                  node("mean", "aten.mean.dim", {ref("relu"), {2, 3}, true}, {2, 3, 1, 1}),
                  node("add", "aten.add.Tensor", {ref("pool"), ref("mean")}, {2, 3, 4, 4})},
                 {"add"}));
  s = plan_pool(across, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("aten.mean.dim is not an elementwise op"), std::string::npos)
      << s.message();

  Graph none = read(graph({tensor_input("x", "input", {4})},
                          {node("relu", "aten.relu.default", {ref("x")}, {4})}, {"relu"}));
  s = plan_pool(none, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pools nothing"), std::string::npos);
}

TEST(SynthPoolPlan, ADepthwiseConvolutionIsAWindowWeightedByItsChannelsFilter) {
  auto depthwise = [](int channels, int size, bool bias) {
    json args = {ref("x"), ref("p_w"), bias ? ref("p_b") : json(nullptr), {2, 2}, {1, 1},
                 {1, 1},   channels};
    return read(graph(
        {tensor_input("x", "input", {2, channels, size, size}),
         tensor_input("p_w", "parameter", {channels, 1, 3, 3}, "conv.weight"),
         tensor_input("p_b", "parameter", {channels}, "conv.bias")},
        {node("conv", "aten.conv2d.default", args, {2, channels, (size + 1) / 2, (size + 1) / 2}),
         node("relu", "aten.relu.default", {ref("conv")},
              {2, channels, (size + 1) / 2, (size + 1) / 2})},
        {"relu"}));
  };
  PoolPlan plan;
  Status s = plan_pool(depthwise(8, 16, true), &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.kind, "depthwise");
  EXPECT_EQ(plan.kernel, (std::vector<std::int64_t>{1, 3, 3}));
  EXPECT_EQ(plan.stride, (std::vector<std::int64_t>{1, 2, 2}));
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"conv2d", "relu"}));
  const std::string source = pool_kernel_source(plan, "cuda");
  EXPECT_NE(source.find("acc[j] += in0 * sa_load(weight[((c * 1 + kd) * 3 + kh) * 3 + kw]);"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const float pooled = acc[j] + sa_load(bias[c]);"), std::string::npos);
  const std::string model = pool_model_source(depthwise(8, 16, true), plan);
  EXPECT_NE(model.find("fused_pool(*inputs, self.conv.weight, self.conv.bias, out,"),
            std::string::npos)
      << model;
  // Another size; no bias.
  PoolPlan other;
  ASSERT_TRUE(plan_pool(depthwise(3, 7, false), &other).ok());
  EXPECT_EQ(other.bias, -1);
  EXPECT_EQ(pool_kernel_source(other, "cpu").find("bias[c]"), std::string::npos);

  // A convolution that mixes channels is no window op of this plan.
  json dense = graph({tensor_input("x", "input", {2, 8, 16, 16}),
                      tensor_input("p_w", "parameter", {8, 8, 3, 3}, "conv.weight")},
                     {node("conv", "aten.conv2d.default", {ref("x"), ref("p_w")}, {2, 8, 14, 14})},
                     {"conv"});
  s = plan_pool(read(dense), &plan);
  EXPECT_FALSE(s.ok());
}

TEST(SynthPoolPlan, PerChannelOpsAreWorkedOutOnceAThreadNotAtEveryElement) {
  // relu6(bn2(depthwise(relu6((x - mean) * rsqrt(var + eps))))) with per-channel statistics
  // (C, 1, 1): their rsqrt is the same across a thread's windows and outputs, so it is worked
  // out before them; x's element and what reads it stay at each element.
  auto block = [](int channels, int size) {
    const json shape = {2, channels, size, size};
    const json channel = {channels, 1, 1};
    return read(
        graph({tensor_input("x", "input", shape), tensor_input("p_mean", "buffer", channel, "mean"),
               tensor_input("p_var", "buffer", channel, "var"),
               tensor_input("p_w", "parameter", {channels, 1, 3, 3}, "conv.weight"),
               tensor_input("p_scale", "parameter", channel, "scale")},
              {node("sub", "aten.sub.Tensor", {ref("x"), ref("p_mean")}, shape),
               node("add", "aten.add.Tensor", {ref("p_var"), 1e-5}, channel),
               node("rsqrt", "aten.rsqrt.default", {ref("add")}, channel),
               node("mul", "aten.mul.Tensor", {ref("sub"), ref("rsqrt")}, shape),
               node("clamp", "aten.hardtanh.default", {ref("mul"), 0.0, 6.0}, shape),
               node("conv", "aten.conv2d.default",
                    {ref("clamp"), ref("p_w"), nullptr, {1, 1}, {1, 1}, {1, 1}, channels}, shape),
               node("add_1", "aten.add.Tensor", {ref("p_var"), 1e-5}, channel),
               node("rsqrt_1", "aten.rsqrt.default", {ref("add_1")}, channel),
               node("mul_1", "aten.mul.Tensor", {ref("conv"), ref("rsqrt_1")}, shape),
               node("scaled", "aten.mul.Tensor", {ref("mul_1"), ref("p_scale")}, shape)},
              {"scaled"}));
  };
  for (auto [channels, size] : {std::pair{8, 16}, std::pair{5, 7}}) {  // a perturbed shape too
    PoolPlan plan;
    Status s = plan_pool(block(channels, size), &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(plan.constant_in_space.size(), plan.inputs.size());
    for (const char* device : {"cpu", "cuda"}) {
      const std::string source = pool_kernel_source(plan, device);
      const std::size_t windows = source.find("for (Ix kh = 0;");
      const std::size_t outputs = source.find("const float pooled = acc[j]");
      ASSERT_NE(windows, std::string::npos) << source;
      // Both square roots (before the pooling and after it) come before the windows.
      std::size_t count = 0;
      for (std::size_t at = source.find("sqrtf("); at != std::string::npos;
           at = source.find("sqrtf(", at + 1)) {
        EXPECT_LT(at, windows) << source;
        ++count;
      }
      EXPECT_EQ(count, 2u) << source;
      // x is read at each element of the windows; after the pooling nothing is read again.
      EXPECT_GT(source.find("in0_data[n * in0_sn + c * in0_sc + d * in0_sd"), windows) << source;
      ASSERT_NE(outputs, std::string::npos) << source;
      const std::size_t store = source.find("sa_store(out", outputs);
      EXPECT_EQ(source.substr(outputs, store - outputs).find("sa_load("), std::string::npos)
          << source;
    }
  }
}

// The pooling kernels split an index into (n, c, d, h) with sa_divider; built with g++ as the
// CPU backend builds it, its 32-bit quotient must be the division's for every divisor and
// numerator a launch can give it: divisors 1 to 2^31 - 1, numerators 0 to 2^31 - 1.
TEST(SynthPoolPlan, TheDividersQuotientIsTheDivisionsForEveryThirtyTwoBitIndex) {
  TempDir dir;
  const auto text = [](const std::filesystem::path& path) {
    std::string contents;
    return read_file(path, &contents).ok() ? contents : std::string();
  };
  const std::string program =
      "#include <stdint.h>\n#include <stdio.h>\n#define SA_FN static inline\n" +
      divider_source("cpu") +
      "static uint64_t state = 88172645463325252ull;\n"
      "static uint32_t draw(uint32_t below) {  // xorshift64, then [0, below)\n"
      "  state ^= state << 13; state ^= state >> 7; state ^= state << 17;\n"
      "  return (uint32_t)(state % below);\n}\n"
      "static int check(int32_t d, int32_t x) {\n"
      "  const int32_t got = sa_divider<int32_t>(d).quot(x);\n"
      "  if (got == x / d && sa_divider<int64_t>(d).quot(x) == x / d) return 0;\n"
      "  printf(\"%d / %d: %d\\n\", x, d, got);\n  return 1;\n}\n"
      "int main() {\n"
      "  const int32_t top = INT32_MAX;\n"
      "  int wrong = 0;\n"
      "  for (int32_t d = 1; d < 4096; ++d)  // small divisors, every numerator near a multiple\n"
      "    for (int32_t x = 0; x < 3 * 4096; ++x) wrong += check(d, x);\n"
      "  for (int k = 0; k < 200000; ++k) {\n"
      "    const int32_t d = (int32_t)draw(top) + 1;\n"
      "    const int32_t x = (int32_t)draw(top);\n"
      "    wrong += check(d, x) + check(d, top) + check(d, top - 1) + check(d, d - 1) +\n"
      "             check(d, d) + check(d, top / d * d) + check(d, top / d * d - 1);\n"
      "  }\n"
      "  for (int s = 0; s < 31; ++s) {  // powers of two and their neighbours\n"
      "    const int32_t p = (int32_t)(1u << s);\n"
      "    const int32_t near[3] = {p, p + 1, p - 1};\n"
      "    for (int32_t d : near)\n"
      "      if (d > 0) wrong += check(d, top) + check(d, top - 1) + check(d, d) + check(d, 0);\n"
      "  }\n"
      "  return wrong != 0;\n}\n";
  ASSERT_TRUE(write_file_atomic(dir.path() / "divider.cpp", program).ok());
  PosixProcessRunner runner;
  ProcessSpec build;
  build.argv = {"g++",
                "-std=c++17",
                "-O2",
                "-o",
                (dir.path() / "divider").string(),
                (dir.path() / "divider.cpp").string()};
  build.stderr_path = dir.path() / "build.log";
  build.timeout_s = 120;
  const ProcessResult built = runner.run(build);
  ASSERT_TRUE(built.succeeded()) << text(dir.path() / "build.log");
  ProcessSpec run;
  run.argv = {(dir.path() / "divider").string()};
  run.stdout_path = dir.path() / "wrong.txt";
  const ProcessResult ran = runner.run(run);
  EXPECT_TRUE(ran.succeeded()) << text(dir.path() / "wrong.txt").substr(0, 2000);
}

}  // namespace
}  // namespace cuda_agent::synth
