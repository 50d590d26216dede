#include "synth/elementwise.h"

#include <gtest/gtest.h>

#include <regex>

#include "eval/compiler_test_util.h"
#include "synth/graph_test_util.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// clamp(leaky_relu(x * scale + shift, 0.1), -0.5, 2), per-feature scale and shift.
json affine_chain(int rows, int features) {
  return {{"schema", "cuda-agent.graph/1"},
          {"inputs",
           {tensor_input("p_scale", "parameter", {features}, "scale"),
            tensor_input("p_shift", "parameter", {features}, "affine.shift"),
            tensor_input("x", "input", {rows, features})}},
          {"nodes",
           {node("mul", "aten.mul.Tensor", {ref("x"), ref("p_scale")}, {rows, features}),
            node("add", "aten.add.Tensor", {ref("mul"), ref("p_shift")}, {rows, features}),
            node("leaky", "aten.leaky_relu.default", {ref("add"), 0.1}, {rows, features}),
            node("clamp", "aten.clamp.default", {ref("leaky"), -0.5, 2.0}, {rows, features})}},
          {"outputs", {"clamp"}}};
}

/// doc with every input and value in bfloat16.
json in_bfloat16(json doc) {
  for (auto& input : doc["inputs"]) input["dtype"] = "bfloat16";
  for (auto& n : doc["nodes"]) n["dtype"] = "bfloat16";
  return doc;
}

TEST(SynthElementwise, AChainBecomesOneBodyReadingEachInputOnce) {
  Graph g = read(affine_chain(64, 32));
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(g, &plan).ok());
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"mul", "add", "leaky_relu", "clamp"}));
  ASSERT_EQ(plan.inputs.size(), 3u);  // x, scale, shift: in the order the ops read them
  EXPECT_EQ(g.values[plan.inputs[0]].name, "x");
  ASSERT_EQ(plan.lines.size(), 4u);
  EXPECT_EQ(plan.lines[2], "const float v2 = (v1 > 0.0f ? v1 : v1 * 0.1f);");
  EXPECT_EQ(plan.lines[3], "const float v3 = sa_min(sa_max(v2, -0.5f), 2.0f);");
  EXPECT_EQ(plan.result, "v3");
  EXPECT_EQ(plan.output_shape, (std::vector<std::int64_t>{64, 32}));
}

TEST(SynthElementwise, ThePlanDoesNotDependOnTheSizes) {
  ElementwisePlan small, large;
  ASSERT_TRUE(plan_elementwise(read(affine_chain(64, 32)), &small).ok());
  ASSERT_TRUE(plan_elementwise(read(affine_chain(40000, 1000)), &large).ok());
  EXPECT_EQ(elementwise_kernel_source(small, "cpu"), elementwise_kernel_source(large, "cpu"));
  EXPECT_EQ(elementwise_kernel_source(small, "cuda"), elementwise_kernel_source(large, "cuda"));
}

TEST(SynthElementwise, KernelsForBothDevicesHaveTheEntryTheModelBinds) {
  Graph g = read(affine_chain(64, 32));
  Candidate cpu_candidate, cuda_candidate;
  ASSERT_TRUE(synthesize_elementwise(g, "cpu", &cpu_candidate).ok());
  ASSERT_TRUE(synthesize_elementwise(g, "cuda", &cuda_candidate).ok());
  const auto& cpu = cpu_candidate.files;
  const auto& cuda = cuda_candidate.files;
  const std::string& cpp = cpu.at("kernels/fused_elementwise.cpp");
  const std::string& cu = cuda.at("kernels/fused_elementwise.cu");
  EXPECT_NE(cpp.find("extern \"C\" int fused_elementwise("), std::string::npos);
  // Each library lets model_new.py choose its launch configuration, which the model sets.
  EXPECT_NE(cpp.find("extern \"C\" int fused_elementwise_config(int64_t config)"),
            std::string::npos);
  EXPECT_NE(cu.find("extern \"C\" int fused_elementwise_config(int64_t config)"),
            std::string::npos);
  EXPECT_NE(cpu.at("model_new.py").find("\nfused_elementwise_config(CONFIG)\n"), std::string::npos);
  EXPECT_NE(cpp.find("#pragma omp parallel for"), std::string::npos);
  EXPECT_NE(cu.find("__global__ void __launch_bounds__(512) fused_elementwise_kernel("),
            std::string::npos);
  EXPECT_NE(cu.find("cudaGetLastError"), std::string::npos);
  const std::string& model = cpu.at("model_new.py");
  // The weights under the task's own names, so the reference's state_dict loads.
  EXPECT_NE(model.find("self.scale = nn.Parameter(torch.empty((32, ), dtype=torch.float32))"),
            std::string::npos)
      << model;
  EXPECT_NE(model.find("self.affine = nn.Module()"), std::string::npos);
  EXPECT_NE(model.find("self.affine.shift = nn.Parameter("), std::string::npos);
  // forward may be handed the tensor to write into (a slice of a cat's result).
  EXPECT_NE(model.find("def forward(self, x, out=None):"), std::string::npos);
  EXPECT_NE(model.find("inputs = [x, self.scale, self.affine.shift, ]"), std::string::npos);
  EXPECT_EQ(cpu.at("model_new.py"), cuda.at("model_new.py"));
}

#if defined(__GLIBC__) && defined(__x86_64__)
TEST(SynthElementwise, ACpuKernelOfTranscendentalsCallsTheVectorMathLibrary) {
  // gelu(sigmoid(x) * x): built as the evaluator builds CPU kernels, the loop calls glibc's
  // vector expf and erff (_ZGV<isa>N<lanes>v_expf), not libm's a element at a time.
  const int rows = 64, features = 32;
  Graph g = read(json{{"schema", "cuda-agent.graph/1"},
                      {"inputs", {tensor_input("x", "input", {rows, features})}},
                      {"nodes",
                       {node("sig", "aten.sigmoid.default", {ref("x")}, {rows, features}),
                        node("mul", "aten.mul.Tensor", {ref("sig"), ref("x")}, {rows, features}),
                        node("gelu", "aten.gelu.default", {ref("mul")}, {rows, features})}},
                      {"outputs", {"gelu"}}});
  Candidate candidate;
  ASSERT_TRUE(synthesize_elementwise(g, "cpu", &candidate).ok());
  TempDir dir;
  Status status;
  const CompileReport report = cuda_agent::testing::build_cpu_kernel(
      dir.path(), "fused_elementwise.cpp", candidate.files.at("kernels/fused_elementwise.cpp"),
      &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(report.ok) << report.error << "\n" << report.log;
  const std::string symbols = cuda_agent::testing::tool_output(
      {"nm", "-D", "--undefined-only", report.library.string()}, dir.path() / "symbols.txt");
  ASSERT_FALSE(symbols.empty()) << "nm of " << report.library;
  EXPECT_TRUE(std::regex_search(symbols, std::regex(R"(_ZGV\w+_expf)"))) << symbols;
  EXPECT_TRUE(std::regex_search(symbols, std::regex(R"(_ZGV\w+_erff)"))) << symbols;
}
#endif

TEST(SynthElementwise, NarrowFloatsAreComputedInFloat32AndRoundedAsTorchRoundsEachOp) {
  json doc = in_bfloat16(affine_chain(64, 32));
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(doc), &plan).ok());
  EXPECT_EQ(plan.output_dtype, "bfloat16");
  EXPECT_EQ(plan.lines[0], "const float v0 = sa_round_bfloat16((in0 * in1));");
  for (const std::string device : {"cpu", "cuda"}) {
    std::string source = elementwise_kernel_source(plan, device);
    EXPECT_NE(source.find("const sa_bf16* __restrict__ in0_data"), std::string::npos) << device;
    const char* store =
        device == std::string("cpu") ? "sa_store(&out_row[c], v3)" : "result[q] = v3;";
    EXPECT_NE(source.find(store), std::string::npos) << device;
  }
}

TEST(SynthElementwise, NarrowFloatsAreRoundedOnlyWhereTheFloat32ValueIsTorchsBitForBit) {
  // y = (x * x) * sigmoid(x * x) + x: the products and the sum are single correctly rounded
  // operations, the sigmoid is not (an exponential and a fast division), nor is what reads it.
  json doc = in_bfloat16(graph({tensor_input("x", "input", {64, 32})},
                               {node("sq", "aten.mul.Tensor", {ref("x"), ref("x")}, {64, 32}),
                                node("sg", "aten.sigmoid.default", {ref("sq")}, {64, 32}),
                                node("gated", "aten.mul.Tensor", {ref("sq"), ref("sg")}, {64, 32}),
                                node("y", "aten.add.Tensor", {ref("gated"), ref("x")}, {64, 32})},
                               {"y"}));
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(doc), &plan).ok());
  ASSERT_EQ(plan.lines.size(), 4u);
  EXPECT_EQ(plan.lines[0], "const float v0 = sa_round_bfloat16((in0 * in0));");
  EXPECT_EQ(plan.lines[1].find("sa_round"), std::string::npos) << plan.lines[1];
  EXPECT_EQ(plan.lines[2], "const float v2 = (v0 * v1);");
  EXPECT_EQ(plan.lines[3], "const float v3 = (v2 + in0);");
}

TEST(SynthElementwise, LinesOfOneValueARowAreComputedOnceAThreadWhereTheirInputsAllow) {
  // y = (x - mean) * (1 / sqrt(var + eps)): over (N, C, H*W) rows, mean and var (C, 1) are one
  // element a row, so 1 / sqrt(var + eps) is one value a row; x - mean reads x, so it is not.
  json doc = graph(
      {tensor_input("x", "input", {8, 16, 64}), tensor_input("mean", "buffer", {16, 1}, "mean"),
       tensor_input("var", "buffer", {16, 1}, "var")},
      {node("shifted", "aten.add.Tensor", {ref("var"), 1e-5}, {16, 1}),
       node("inv", "aten.rsqrt.default", {ref("shifted")}, {16, 1}),
       node("centred", "aten.sub.Tensor", {ref("x"), ref("mean")}, {8, 16, 64}),
       node("y", "aten.mul.Tensor", {ref("centred"), ref("inv")}, {8, 16, 64})},
      {"y"});
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(doc), &plan).ok());
  EXPECT_EQ(plan.line_per_row, (std::vector<bool>{true, true, false, false}));
  ASSERT_EQ(plan.inputs.size(), 3u);
  EXPECT_EQ(plan.per_row_inputs, (std::vector<int>{0}));  // var, the first input read
  const std::string source = elementwise_kernel_source(plan, "cuda");
  EXPECT_NE(source.find("    const bool per_row = !step0;\n    if (per_row) {\n"
                        "      const float in0 = s0;\n"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const float v1 = hv1;"), std::string::npos);
  // Where var runs along the rows after all (a shape the kernel also takes), the body computes
  // every line per element.
  EXPECT_NE(source.find("} else {"), std::string::npos);
  // The per-row lines are computed after the loads of the thread's vectors are issued.
  EXPECT_LT(source.find("sa_load_v<V>(row1 + c + u * span, x1[u]);"),
            source.find("const bool per_row"));
}

TEST(SynthElementwise, CudaReadsFourElementsAtATimeOnlyWhereEveryRowIsAligned) {
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(affine_chain(64, 32)), &plan).ok());
  const std::string source = elementwise_kernel_source(plan, "cuda");
  // A broadcast input (step 0) is read one element at a time whatever its address; the rows of
  // one read along them, and the output's, start at multiples of its pitch (a view's row
  // stride).
  EXPECT_NE(
      source.find("if (cols % 4 == 0 && sa_aligned<4>(out) && out_pitch % 4 == 0 && (!step0 || "
                  "(sa_aligned<4>(in0_data) && pitch0 % 4 == 0)) && (!step1 || "
                  "(sa_aligned<4>(in1_data) && pitch1 % 4 == 0))"),
      std::string::npos)
      << source;
  EXPECT_NE(source.find("return launch_v<4>("), std::string::npos);
  EXPECT_NE(source.find("return launch_v<1>("), std::string::npos);
  EXPECT_NE(source.find("sa_store_v<V>(out_row + c + u * span, result);"), std::string::npos);
  // A broadcast input's element is read once a row, not once a vector.
  EXPECT_NE(source.find("const float s1 = step1 ? 0.0f : sa_load(row1[0]);"), std::string::npos)
      << source;
  // 32-bit index arithmetic where the output's and the inputs' offsets fit, 64-bit past that.
  EXPECT_NE(source.find("if (rows * cols <= INT32_MAX - 65536 && rows * out_pitch <= INT32_MAX - "
                        "65536 && mod0 * pitch0 <= INT32_MAX - 65536 && mod1 * pitch1 <= "
                        "INT32_MAX - 65536 && mod2 * pitch2 <= INT32_MAX - 65536 &&\n"
                        "      tiles < (INT64_C(1) << 30))\n"
                        "    fused_elementwise_kernel<V, U, int32_t>"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("  else\n    fused_elementwise_kernel<V, U, int64_t>"), std::string::npos);
}

TEST(SynthElementwise, CudaReadsEightElementsAtATimeWhenEveryTensorIs16Bit) {
  json doc = in_bfloat16(affine_chain(64, 32));
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(doc), &plan).ok());
  const std::string narrow = elementwise_kernel_source(plan, "cuda");
  EXPECT_NE(narrow.find("if (cols % 8 == 0 && sa_aligned<8>(out) && out_pitch % 8 == 0"),
            std::string::npos)
      << narrow;
  EXPECT_NE(narrow.find("return launch_v<8>("), std::string::npos);

  // One float32 tensor among them: 4 a time, 16 bytes of it.
  doc["inputs"][1]["dtype"] = "float32";
  ASSERT_TRUE(plan_elementwise(read(doc), &plan).ok());
  const std::string mixed = elementwise_kernel_source(plan, "cuda");
  EXPECT_EQ(mixed.find("launch_v<8>("), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("return launch_v<4>("), std::string::npos);
}

TEST(SynthElementwise, CostlyBodiesTakeFourVectorsAThreadAndTheTunerTriesBoth) {
  const auto unary = [](const char* target) {
    return read({{"schema", "cuda-agent.graph/1"},
                 {"inputs", {tensor_input("x", "input", {64, 32})}},
                 {"nodes", {node("y", target, {ref("x")}, {64, 32})}},
                 {"outputs", {"y"}}});
  };
  Candidate cheap, costly;
  ASSERT_TRUE(synthesize_elementwise(unary("aten.relu.default"), "cuda", &cheap).ok());
  ASSERT_TRUE(synthesize_elementwise(unary("aten.gelu.default"), "cuda", &costly).ok());
  // relu by default one vector a thread, erf's gelu four; each tries the other too.
  ASSERT_EQ(cheap.configs.size(), 3u);
  EXPECT_EQ(cheap.configs[0].label, "256 threads, 1 vector each");
  EXPECT_EQ(cheap.configs[1].label, "256 threads, 4 vectors each");
  EXPECT_EQ(costly.configs[0].label, "256 threads, 4 vectors each");
  EXPECT_EQ(costly.configs[1].label, "256 threads, 1 vector each");
  EXPECT_EQ(costly.configs[2].label, "512 threads, 4 vectors each");
  // Each configuration the tuner may set selects the threads and vectors its label names.
  const std::string& cu = costly.files.at("kernels/fused_elementwise.cu");
  EXPECT_NE(cu.find("const int threads = sa_config >= 0 ? 128 << (sa_config % 3) : 256;"),
            std::string::npos);
  EXPECT_NE(cu.find("const int unroll = sa_config >= 0 ? (sa_config < 3 ? 1 : 4) : 4;"),
            std::string::npos)
      << cu;
  EXPECT_EQ(costly.configs[1].id % 3, 1);  // 256 threads
  EXPECT_LT(costly.configs[1].id, 3);      // one vector
  EXPECT_EQ(costly.configs[2].id, 5);      // 512 threads, four vectors
}

TEST(SynthElementwise, ManyInputsTakeOneVectorAThreadAndTheTunerNeverTriesFour) {
  // Four vectors of each of 9 float32 inputs (144 floats) would not fit a thread's registers
  // (an unrolled GRU's gate kernel spilled 1.7 KB a thread at 13): one vector a thread, and
  // 256 or 512 threads the tuner's only choice.
  const std::vector<std::string> names = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"};
  json inputs = json::array(), nodes = json::array();
  for (const std::string& name : names) inputs.push_back(tensor_input(name, "input", {64, 32}));
  std::string sum = names[0];
  for (std::size_t k = 1; k < names.size(); ++k) {
    const std::string next = "s" + names[k];
    nodes.push_back(
        node(next, "aten.add.Tensor", {testing::ref(sum), testing::ref(names[k])}, {64, 32}));
    sum = next;
  }
  nodes.push_back(
      node("y", "aten.gelu.default", {testing::ref(sum)}, {64, 32}));  // costly: else four
  Candidate many;
  ASSERT_TRUE(synthesize_elementwise(read({{"schema", "cuda-agent.graph/1"},
                                           {"inputs", inputs},
                                           {"nodes", nodes},
                                           {"outputs", {"y"}}}),
                                     "cuda", &many)
                  .ok());
  ASSERT_EQ(many.configs.size(), 2u);
  EXPECT_EQ(many.configs[0].label, "256 threads, 1 vector each");
  EXPECT_EQ(many.configs[1].label, "512 threads, 1 vector each");
  EXPECT_EQ(many.configs[1].id, 2);
  // Nor is the kernel built for four.
  const std::string& cu = many.files.at("kernels/fused_elementwise.cu");
  EXPECT_EQ(cu.find("launch<V, 4>"), std::string::npos) << cu;
  EXPECT_NE(cu.find("  return launch<V, 1>("), std::string::npos);
}

/// loss(prediction, target, reduction, extra) over (8, 16): smooth_l1_loss's beta or kl_div's
/// log_target as extra.
json loss(const std::string& target, int reduction, json extra) {
  return graph({tensor_input("pred", "input", {8, 16}), tensor_input("target", "input", {8, 16})},
               {node("loss", target, {ref("pred"), ref("target"), reduction, extra}, {8, 16})},
               {"loss"});
}

TEST(SynthElementwise, LossesWithoutAReductionAreElementwiseAndReducedOnesAreNamed) {
  ElementwisePlan plan;
  ASSERT_TRUE(plan_elementwise(read(loss("aten.smooth_l1_loss.default", 0, 0.5)), &plan).ok());
  // |d| < beta ? d^2 / (2 beta) : |d| - beta / 2, with d = pred - target.
  EXPECT_EQ(plan.lines[0],
            "const float v0 = (fabsf(in0 - in1) < 0.5f ? 0.5f * (in0 - in1) * (in0 - in1) / 0.5f "
            ": fabsf(in0 - in1) - 0.25f);");
  ASSERT_TRUE(plan_elementwise(read(loss("aten.kl_div.default", 0, false)), &plan).ok());
  // xlogy(target, target) - target * pred: 0 where the target is 0.
  EXPECT_EQ(plan.lines[0],
            "const float v0 = ((in1 == 0.0f ? 0.0f : in1 * logf(in1)) - in1 * in0);");
  ASSERT_TRUE(plan_elementwise(read(loss("aten.kl_div.default", 0, true)), &plan).ok());
  EXPECT_EQ(plan.lines[0], "const float v0 = expf(in1) * (in1 - in0);");
  // torch's default reduction (1, the mean) is a reduction, not this plan's.
  Status s = plan_elementwise(read(loss("aten.smooth_l1_loss.default", 1, 1.0)), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("with a reduction"), std::string::npos) << s.message();
}

TEST(SynthElementwise, WhereSelectsByABoolConditionAndKeepsTheOperandsExact) {
  // where(cond, x, 0.5) on bfloat16: a selection is exact, so it is rounded like the ops
  // around it, and the condition, a bool tensor, is read as 1 or 0.
  json doc = in_bfloat16(graph(
      {tensor_input("x", "input", {8, 16}), tensor_input("cond", "input", {8, 16})},
      {node("where", "aten.where.ScalarOther", {ref("cond"), ref("x"), 0.5}, {8, 16})}, {"where"}));
  doc["inputs"][1]["dtype"] = "bool";
  Graph g = read(doc);
  ElementwisePlan plan;
  Status s = plan_elementwise(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.input_dtypes, (std::vector<std::string>{"bool", "bfloat16"}));
  ASSERT_EQ(plan.lines.size(), 1u);
  EXPECT_EQ(plan.lines[0], "const float v0 = sa_round_bfloat16((in0 != 0.0f ? in1 : 0.5f));");
  EXPECT_NE(elementwise_kernel_source(plan, "cuda").find("const bool* __restrict__ in0_data"),
            std::string::npos);
}

TEST(SynthElementwise, WhatThePlanCannotTakeIsNamed) {
  json doc = affine_chain(64, 32);
  doc["nodes"].push_back(
      node("total", "aten.sum.dim_IntList", {ref("clamp"), json::array({-1})}, {64}));
  doc["outputs"] = {"total"};
  ElementwisePlan plan;
  Status s = plan_elementwise(read(doc), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("aten.sum.dim_IntList"), std::string::npos) << s.message();

  json integer = affine_chain(64, 32);
  integer["nodes"][0]["dtype"] = "int32";
  s = plan_elementwise(read(integer), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();

  json two = affine_chain(64, 32);
  two["outputs"] = {"clamp", "mul"};
  s = plan_elementwise(read(two), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("returns 2 values"), std::string::npos) << s.message();

  json gap = affine_chain(64, 32);  // a (64, 1, 32) weight over (64, 8, 32): two runs of sizes
  gap["inputs"][0]["shape"] = {64, 1, 32};
  gap["inputs"][2]["shape"] = {64, 8, 32};
  for (auto& n : gap["nodes"]) n["shape"] = {64, 8, 32};
  s = plan_elementwise(read(gap), &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not broadcast"), std::string::npos) << s.message();
}

TEST(SynthElementwise, AViewWhoseTrailingDimsAreContiguousIsWalkedAsRowsOfThem) {
  const auto walk = [](std::vector<std::int64_t> shape, std::vector<std::int64_t> stride) {
    TensorType t;
    t.shape = std::move(shape);
    t.stride = std::move(stride);
    const ElementwiseWalk w = elementwise_walk(t);
    return std::vector<std::int64_t>{w.cols, w.groups, w.pitch};
  };
  using W = std::vector<std::int64_t>;                               // cols, groups, pitch
  EXPECT_EQ(walk({4, 6, 8}, {48, 8, 1})[0], 0);                      // contiguous
  EXPECT_EQ(walk({4, 6, 8}, {})[0], 0);                              // not recorded
  EXPECT_EQ(walk({4, 6, 8}, {144, 24, 1}), (W{8, 1, 24}));           // a chunk of dim 2
  EXPECT_EQ(walk({4, 1, 8}, {40, 8, 1}), (W{8, 1, 40}));             // a select
  EXPECT_EQ(walk({4, 6, 8}, {96, 8, 1}), (W{48, 1, 96}));            // a narrow of dim 1
  EXPECT_EQ(walk({3, 4, 6, 8}, {960, 240, 8, 1}), (W{48, 1, 240}));  // dims 0 and 1 merge
  EXPECT_EQ(walk({3, 4, 6, 8}, {960, 96, 8, 1}), (W{48, 2, 96}));    // they do not
  // Heads transposed out of a (2, 5, 3 x 8) projection: (batch, head, token) are three runs.
  EXPECT_EQ(walk({2, 3, 5, 8}, {120, 8, 24, 1}), (W{8, 3, 24}));
  EXPECT_EQ(walk({1, 3, 5, 8}, {120, 8, 24, 1}), (W{8, 2, 24}));  // one batch: two
  EXPECT_EQ(walk({4, 6, 8}, {8, 8, 1}), (W{48, 1, 8}));  // rows overlapping: read, not written
  EXPECT_EQ(walk({4, 6, 8}, {0, 8, 1}), (W{48, 1, 0}));  // an expanded dim: likewise
  EXPECT_EQ(walk({4, 6, 8}, {48, 1, 6})[0], -1);         // transposed last dims
  EXPECT_EQ(walk({4, 6, 1}, {48, 8, 1})[0], -1);         // no contiguous row
}

TEST(SynthElementwise, ABroadcastInputIsReadInPlaceWhereItIsOneRunConstantAlongARow) {
  ElementwisePlan plan;
  plan.output_shape = {4, 6, 8};
  plan.input_full = {true, false, false};
  plan.input_shapes = {{4, 6, 8}, {4, 6, 1}, {8}};
  const auto typed = [](std::vector<std::int64_t> shape, std::vector<std::int64_t> stride) {
    TensorType t;
    t.shape = std::move(shape);
    t.stride = std::move(stride);
    return t;
  };
  // A gate a row, a column of a (24, 3) matrix: its elements 3 apart, one for each row.
  EXPECT_TRUE(elementwise_reads_broadcast_in_place(plan, 1, typed({4, 6, 1}, {18, 3, 1}), 0));
  EXPECT_TRUE(elementwise_reads_broadcast_in_place(plan, 1, typed({4, 6, 1}, {18, 3, 1}), 8));
  // Rows of 48 (a view of the output's shape read in place fixed them) have four gates each.
  EXPECT_FALSE(elementwise_reads_broadcast_in_place(plan, 1, typed({4, 6, 1}, {18, 3, 1}), 48));
  EXPECT_FALSE(elementwise_reads_broadcast_in_place(plan, 1, typed({4, 6, 1}, {36, 3, 1}), 0));
  // A vector along the row, its elements apart, would make rows of one element: copied.
  EXPECT_FALSE(elementwise_reads_broadcast_in_place(plan, 2, typed({8}, {2}), 0));
  EXPECT_FALSE(elementwise_reads_broadcast_in_place(plan, 0, typed({4, 6, 8}, {48, 8, 1}), 0));
}

TEST(SynthElementwise, RowsOfSeveralDimsSuitOnlyInputsThatRunAlongAllOfThemOrNone) {
  ElementwisePlan plan;
  plan.output_shape = {4, 6, 8};
  plan.input_shapes = {{4, 6, 8}, {6, 8}};  // the output's shape; a (6, 8) table
  EXPECT_TRUE(elementwise_rows_fit(plan, 8));
  EXPECT_TRUE(elementwise_rows_fit(plan, 48));
  plan.input_shapes.push_back({6, 1});  // one value per position along dim 1
  EXPECT_TRUE(elementwise_rows_fit(plan, 8));
  EXPECT_FALSE(elementwise_rows_fit(plan, 48));
  EXPECT_FALSE(elementwise_rows_fit(plan, 0));
}

}  // namespace
}  // namespace cuda_agent::synth
