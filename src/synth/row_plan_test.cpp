#include "synth/row_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "synth/graph_test_util.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

using namespace testing;

/// softmax(x * 0.5, dim=-1) over (rows, cols).
json scaled_softmax(int rows, int cols) {
  return graph({tensor_input("x", "input", {rows, cols})},
               {node("mul", "aten.mul.Tensor", {ref("x"), 0.5}, {rows, cols}),
                node("softmax", "aten.softmax.int", {ref("mul"), -1}, {rows, cols})},
               {"softmax"});
}

/// nn.LayerNorm(cols) over (rows, cols): the input, weight and bias all read along the row.
json layer_norm(int rows, int cols) {
  return graph({tensor_input("p_w", "parameter", {cols}, "norm.weight"),
                tensor_input("p_b", "parameter", {cols}, "norm.bias"),
                tensor_input("x", "input", {rows, cols})},
               {node("ln", "aten.layer_norm.default",
                     {ref("x"), {cols}, ref("p_w"), ref("p_b"), 1e-5}, {rows, cols})},
               {"ln"});
}

/// Every configuration the tuner may choose has a case in the kernel's switch, behind guard.
void expect_a_case_for_each(const std::string& source, const std::vector<KernelConfig>& configs,
                            const std::string& guard) {
  for (const KernelConfig& c : configs) {
    EXPECT_NE(source.find("case " + std::to_string(c.id) + ": " + guard), std::string::npos)
        << c.label;
  }
}

TEST(SynthRowPlan, SoftmaxReadsTheRowOnceForItsStatisticsThenWrites) {
  RowPlan plan;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 1000)), &plan).ok());
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.first_reduced, 1);
  EXPECT_EQ(plan.last_reduced, 1);
  // The maximum and the sum of exponentials below it, online, in one pass.
  EXPECT_EQ(plan.passes, 1);
  ASSERT_EQ(plan.accumulators.size(), 1u);
  EXPECT_EQ(plan.accumulators[0].kind, "lse");
  EXPECT_EQ(plan.accumulators[0].pass, 1);
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_TRUE(plan.outputs[0].per_element);
  EXPECT_EQ(plan.ops, (std::vector<std::string>{"mul", "softmax"}));
}

TEST(SynthRowPlan, ThePlanDoesNotDependOnTheSizes) {
  RowPlan a, b;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 1000)), &a).ok());
  ASSERT_TRUE(plan_rows(read(scaled_softmax(3, 7)), &b).ok());
  EXPECT_EQ(row_kernel_source(a, "cuda"), row_kernel_source(b, "cuda"));
  EXPECT_EQ(row_kernel_source(a, "cpu"), row_kernel_source(b, "cpu"));
}

TEST(SynthRowPlan, CudaKeepsContiguousAlignedRowsInRegistersAsFarAsTheyFit) {
  RowPlan softmax;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 1000)), &softmax).ok());
  const std::string one = row_kernel_source(softmax, "cuda");
  EXPECT_NE(one.find("const bool streamed = I == 1 && R % 4 == 0 && in0_step == 1 && "
                     "in0_stride_o % 4 == 0 && sa_aligned<4>(in0_data) && sa_aligned<4>(out0);\n"
                     "  const bool cached = streamed && R <= 32768;"),
            std::string::npos)
      << one;
  // One row input held: rows up to 32768 elements stay in registers; longer ones are streamed,
  // 4 elements at a time; strided or unaligned rows take the strided walk.
  EXPECT_NE(one.find("if (R <= 32768) return launch_cached<1, 512, 16, 4>("), std::string::npos);
  EXPECT_NE(one.find("if (streamed) {\n    if (R >= 8192) return launch_streamed<512>("),
            std::string::npos);
  EXPECT_NE(one.find("return launch_strided<1, 512>("), std::string::npos);

  // Three inputs read along the row (x, weight, bias) leave room for 16384 elements a row.
  Graph g = read(layer_norm(8, 256));
  RowPlan norm;
  ASSERT_TRUE(plan_rows(g, &norm).ok());
  const std::string three = row_kernel_source(norm, "cuda");
  EXPECT_NE(three.find("if (R <= 16384) return launch_cached<1, 512, 8, 4>("), std::string::npos);
  EXPECT_EQ(three.find("if (R <= 32768)"), std::string::npos);
  EXPECT_EQ(three.find("launch_cached<1, 1024, 4, 4>("), std::string::npos);  // over 64 registers
}

TEST(SynthRowPlan, SixteenBitRowsAlsoOfferTheTunerRunsOf8Elements) {
  // A bfloat16 layer norm: x, weight, bias and the output all 16-bit along the rows. Each of
  // the first two cached shapes has a twin in half as many runs of 8 (16 bytes a load), behind
  // a check that every tensor along the rows is aligned to 8 elements; the default is unchanged.
  json doc = layer_norm(8, 4096);
  for (json& in : doc["inputs"]) in["dtype"] = "bfloat16";
  doc["nodes"][0]["dtype"] = "bfloat16";
  RowPlan wide;
  ASSERT_TRUE(plan_rows(read(doc), &wide).ok());
  const std::vector<KernelConfig> configs = row_configs(wide, "cuda");
  std::vector<std::string> of8;
  for (const KernelConfig& c : configs) {
    if (c.label.find("runs of 8") != std::string::npos) of8.push_back(c.label);
  }
  ASSERT_EQ(of8.size(), 2u);
  EXPECT_EQ(configs.front().label.find("runs of 8"), std::string::npos);
  const std::string source = row_kernel_source(wide, "cuda");
  EXPECT_NE(source.find("const bool cached8 = cached && I == 1 && R % 8 == 0 && in0_step == 1 && "
                        "in0_stride_o % 8 == 0 && sa_aligned<8>(in0_data)"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("sa_aligned<8>(in2_data) && sa_aligned<8>(out0);"), std::string::npos);
  EXPECT_NE(source.find("if (cached8 && R <= 4096) return launch_cached<1, 256, 2, 8>("),
            std::string::npos);
  expect_a_case_for_each(source, configs, "if (");
  // Float32 rows read 16 bytes in runs of 4 already: no twins, no check.
  RowPlan narrow;
  ASSERT_TRUE(plan_rows(read(layer_norm(8, 4096)), &narrow).ok());
  for (const KernelConfig& c : row_configs(narrow, "cuda"))
    EXPECT_EQ(c.label.find("runs of 8"), std::string::npos) << c.label;
  EXPECT_EQ(row_kernel_source(narrow, "cuda").find("cached8"), std::string::npos);
}

TEST(SynthRowPlan, RowsLongerThanTheRegistersHoldAreKeptInAClustersSharedMemory) {
  // A layer norm over 65536 elements a row: a cluster of blocks takes each row, each block a
  // segment that it reads 4 elements at a time once and keeps in shared memory for the output
  // pass; the weight and bias, the same for every row, are read again from the cache.
  RowPlan norm;
  Graph g = read(layer_norm(4, 65536));
  ASSERT_TRUE(plan_rows(g, &norm).ok());
  std::string x, w;
  for (std::size_t k = 0; k < norm.inputs.size(); ++k) {
    const std::string& name = g.values[norm.inputs[k].value].name;
    if (name == "x") x = std::to_string(k);
    if (name == "p_w") w = std::to_string(k);
  }
  EXPECT_TRUE(norm.inputs[std::stoi(x)].per_row);
  EXPECT_FALSE(norm.inputs[std::stoi(w)].per_row);
  const std::string source = row_kernel_source(norm, "cuda");
  EXPECT_NE(source.find("for (int64_t k0 = lo + (int64_t)ty * 4; k0 < hi; k0 += TY * 4) {"),
            std::string::npos);
  EXPECT_NE(source.find("sa_load4(b" + x + " + k0, c" + x + ");\n      sa_keep4(kept + 0 * seg"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("sa_take4(kept + 0 * seg + (k0 - lo), c" + x + ");"), std::string::npos);
  EXPECT_EQ(source.find("kept + 1 * seg"), std::string::npos);  // one input kept
  EXPECT_NE(source.find("sa_cluster_combine<TX, TY, LANES>("), std::string::npos);
  // By default 8 blocks a row where a block's segment (R / 32 runs of 4 floats of the one input
  // kept) fits 72 KB, the launcher and that bound taking the same size; a launch the device
  // refuses falls through to the streamed walk.
  EXPECT_NE(source.find("return (size_t)((R + 4 * CL - 1) / (4 * CL) * 4) * 1 * sizeof(float);"),
            std::string::npos);
  EXPECT_NE(source.find("const size_t bytes = sa_segment_bytes<CL>(R);"), std::string::npos);
  const std::size_t by_default =
      source.find("if (sa_segment_bytes<8>(R) <= 73728) {\n      if (launch_clustered<8, 256>(");
  ASSERT_NE(by_default, std::string::npos);
  EXPECT_LT(source.find("(void)cudaGetLastError();", by_default),
            source.find("if (streamed) {", by_default));
  EXPECT_NE(source.find("sa_store4(out0 + o * R + k0, r0);"), std::string::npos);
  // The tuner tries the clustered shapes whose segments fit, the default (8 blocks of 256
  // threads: 32 KB a block) first, then the streamed walk (a row a block, read each pass),
  // and the kernel has a case for each.
  const auto configs = row_configs(norm, "cuda");
  ASSERT_EQ(configs.size(), 4u);
  EXPECT_EQ(configs[0].label,
            "a row a cluster of 8 blocks, 256 threads each, kept in shared memory");
  EXPECT_EQ(configs[3].label, "a row a block, 512 threads, 4 elements at a time");
  expect_a_case_for_each(source, {configs.begin(), configs.begin() + 3}, "if (clustered && ");
  expect_a_case_for_each(source, {configs[3]}, "if (streamed) return ");
  EXPECT_NE(source.find("for (int64_t k0 = (int64_t)ty * 4; k0 < R; k0 += TY * 4) {"),
            std::string::npos);
  // The same at a length that is no power of two; rows of 4 | R only.
  RowPlan other;
  ASSERT_TRUE(plan_rows(read(layer_norm(3, 40004)), &other).ok());
  EXPECT_EQ(row_configs(other, "cuda")[0].id, configs[0].id);
  ASSERT_TRUE(plan_rows(read(layer_norm(3, 40002)), &other).ok());
  EXPECT_EQ(row_configs(other, "cuda")[0].label, "rows 1 x 512 threads");
}

TEST(SynthRowPlan, TheTunerTriesShapesThatReachTheRowDefaultFirst) {
  RowPlan softmax;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 1000)), &softmax).ok());
  const auto configs = row_configs(softmax, "cuda");
  ASSERT_GE(configs.size(), 2u);
  EXPECT_EQ(configs[0].label, "rows 1 x 64 threads x 4 runs of 4");  // what fused_rows picks
  const std::string source = row_kernel_source(softmax, "cuda");
  expect_a_case_for_each(source, configs, "if (cached && R <= ");

  // Rows 30 apart (a sum over the middle dim, rows not in fours) go to the strided walk's
  // shapes; rows 32 apart, four at a time, to the quad walk's.
  const auto sum_over_middle = [](int reduced, int inner) {
    return read(graph({tensor_input("x", "input", {8, reduced, inner})},
                      {node("s", "aten.sum.dim_IntList", {ref("x"), {1}}, {8, inner})}, {"s"}));
  };
  RowPlan strided;
  ASSERT_TRUE(plan_rows(sum_over_middle(64, 30), &strided).ok());
  const auto strided_configs = row_configs(strided, "cuda");
  ASSERT_GE(strided_configs.size(), 2u);
  EXPECT_EQ(strided_configs[0].label, "rows 64 x 8 threads");
  EXPECT_NE(row_kernel_source(strided, "cuda")
                .find("case " + std::to_string(strided_configs[1].id) + ": return launch_strided<"),
            std::string::npos);
  // The quad walk's threads a row grow with its length (about one per 16 elements).
  const auto quad_shape = [&](int reduced, int inner) {
    RowPlan quads;
    EXPECT_TRUE(plan_rows(sum_over_middle(reduced, inner), &quads).ok());
    const auto configs = row_configs(quads, "cuda");
    EXPECT_EQ(configs.size(), 3u);
    expect_a_case_for_each(row_kernel_source(quads, "cuda"), configs,
                           "if (quads) return launch_quads<");
    return configs[0].label;
  };
  EXPECT_EQ(quad_shape(16, 1024), "quads of rows 256 x 1 threads");
  EXPECT_EQ(quad_shape(64, 1024), "quads of rows 128 x 2 threads");
  EXPECT_EQ(quad_shape(256, 1024), "quads of rows 64 x 8 threads");
  EXPECT_EQ(quad_shape(2048, 1024), "quads of rows 64 x 8 threads");
  EXPECT_EQ(quad_shape(2048, 32), "quads of rows 16 x 32 threads");  // 8 quads side by side
  EXPECT_EQ(row_configs(strided, "cpu").size(), cpu_schedules().size());
}

TEST(SynthRowPlan, TasksOfOneKindShareAPatternAndSizesPickTheClass) {
  Candidate a, b, c;
  ASSERT_TRUE(synthesize_rows(read(scaled_softmax(64, 1000)), "cuda", &a).ok());
  ASSERT_TRUE(synthesize_rows(read(scaled_softmax(60, 900)), "cuda", &b).ok());
  ASSERT_TRUE(synthesize_rows(read(scaled_softmax(64, 5000)), "cuda", &c).ok());
  EXPECT_EQ(a.pattern, b.pattern);
  EXPECT_EQ(a.pattern, c.pattern);
  EXPECT_EQ(a.shape_class, b.shape_class);
  EXPECT_NE(a.shape_class, c.shape_class);
  EXPECT_EQ(a.shape_class, "rows of 2^10, 2^6 of them");
  EXPECT_NE(a.files.at("model_new.py").find("\nfused_rows_config(CONFIG)\n"), std::string::npos);
}

TEST(SynthRowPlan, LayerNormReadsItsWeightAndBiasAlongTheRow) {
  Graph g = read(layer_norm(8, 256));
  RowPlan plan;
  ASSERT_TRUE(plan_rows(g, &plan).ok());
  EXPECT_EQ(plan.passes, 1);  // mean and variance in one pass: the row is read once, then written
  ASSERT_EQ(plan.accumulators.size(), 1u);
  EXPECT_EQ(plan.accumulators[0].kind, "moments");
  ASSERT_EQ(plan.inputs.size(), 3u);
  for (const RowInput& in : plan.inputs) EXPECT_TRUE(in.per_element);
  std::string model = row_model_source(g, plan);
  EXPECT_NE(model.find("self.norm.weight = nn.Parameter"), std::string::npos);
}

TEST(SynthRowPlan, AReductionOverAMiddleDimRunsStridedRowsWithAPerChannelBias) {
  // min(x + bias, dim=1).values over NCHW: rows are (n, h, w), inner = H*W.
  Graph g =
      read(graph({tensor_input("p_bias", "parameter", {16, 1, 1}, "bias"),
                  tensor_input("x", "input", {2, 16, 4, 8})},
                 {node("add", "aten.add.Tensor", {ref("x"), ref("p_bias")}, {2, 16, 4, 8}),
                  node("min_1", "aten.min.dim", {ref("add"), 1},
                       json::array({{2, 4, 8}, {2, 4, 8}}), json::array({"float32", "int64"})),
                  node("getitem", "operator.getitem", {ref("min_1"), 0}, {2, 4, 8}),
                  node("tanh", "aten.tanh.default", {ref("getitem")}, {2, 4, 8})},
                 {"tanh"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.first_reduced, 1);
  EXPECT_EQ(plan.last_reduced, 1);
  ASSERT_EQ(plan.accumulators.size(), 1u);
  EXPECT_EQ(plan.accumulators[0].kind, "argmin");
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_FALSE(plan.outputs[0].per_element);
  EXPECT_FALSE(plan.outputs[0].keepdim);
  // The bias varies along the reduced dim: read per element, its dims on F's dims 1..3.
  ASSERT_EQ(plan.inputs.size(), 2u);
  EXPECT_EQ(plan.inputs[1].dims, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(plan.inputs[1].per_element);
}

TEST(SynthRowPlan, RowsInnerApartAreReadFourNeighboursAtATime) {
  // (x * w).sum(dim=1) * scale over (N, C, H, W): x runs along four neighbouring rows (w, w+1,
  // ...), the weight (C, H, 1) is the same for all four, the scale (W) is read once a row.
  Graph g = read(graph(
      {tensor_input("p_w", "parameter", {16, 4, 1}, "weight"),
       tensor_input("p_s", "parameter", {32}, "scale"), tensor_input("x", "input", {2, 16, 4, 32})},
      {node("mul", "aten.mul.Tensor", {ref("x"), ref("p_w")}, {2, 16, 4, 32}),
       node("sum", "aten.sum.dim_IntList", {ref("mul"), {1}}, {2, 4, 32}),
       node("mul_1", "aten.mul.Tensor", {ref("sum"), ref("p_s")}, {2, 4, 32})},
      {"mul_1"}));
  RowPlan plan;
  ASSERT_TRUE(plan_rows(g, &plan).ok());
  const std::string source = row_kernel_source(plan, "cuda");
  // The launcher takes the quad walk only where each input read along the rows runs along the
  // four (aligned) or is the same for all of them.
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    const std::string in = "in" + std::to_string(k);
    const bool along = plan.inputs[k].per_element;
    EXPECT_EQ(
        source.find("(" + in + "_mod_i == 1 || " + in + "_div_i % 4 == 0 || (" + in +
                    "_div_i == 1 && " + in + "_stride_i == 1 && " + in + "_mod_i % 4 == 0 && " +
                    in + "_step % 4 == 0 && " + in + "_stride_o % 4 == 0 && sa_aligned<4>(" + in +
                    "_data)))") != std::string::npos,
        along)
        << in;
    // Along the rows: one read of four lanes a step; once a row: each lane's own element.
    EXPECT_EQ(source.find("sa_lanes4(b" + std::to_string(k) + " + k * " + in + "_step") !=
                  std::string::npos,
              along);
    EXPECT_EQ(source.find(in + "_[q] = sa_load((" + in + "_data") != std::string::npos, !along);
  }
  EXPECT_NE(source.find("const bool quads = I % 4 == 0 && I >= 16"), std::string::npos);
  // Each lane keeps its own sum, combined across the block lane by lane, and its own result.
  EXPECT_NE(source.find("float& a0 = a0_[q];"), std::string::npos) << source;
  EXPECT_NE(source.find("a0 = sa_combine<TX, TY, LANES>(a0, red, tx, ty, sa_add_of());"),
            std::string::npos);
  EXPECT_NE(source.find("sa_store(&out0[row + q], "), std::string::npos);
}

TEST(SynthRowPlan, MaxWithIndicesWritesBothOutputs) {
  Graph g = read(graph({tensor_input("x", "input", {32, 100})},
                       {node("max_1", "aten.max.dim", {ref("x"), -1}, json::array({{32}, {32}}),
                             json::array({"float32", "int64"})),
                        node("values", "operator.getitem", {ref("max_1"), 0}, {32}),
                        node("indices", "operator.getitem", {ref("max_1"), 1}, {32}, "int64")},
                       {"values", "indices"}));
  RowPlan plan;
  ASSERT_TRUE(plan_rows(g, &plan).ok());
  ASSERT_EQ(plan.outputs.size(), 2u);
  EXPECT_FALSE(plan.outputs[0].index);
  EXPECT_TRUE(plan.outputs[1].index);
  EXPECT_NE(row_kernel_source(plan, "cuda").find("int64_t* __restrict__ out1"), std::string::npos);
}

TEST(SynthRowPlan, ABfloat16NormIsComputedInFloat32AndStoredRounded) {
  json doc =
      graph({tensor_input("x", "input", {8, 64})},
            {node("rms", "aten.rms_norm.default", {ref("x"), {64}}, {8, 64}, "bfloat16")}, {"rms"});
  doc["inputs"][0]["dtype"] = "bfloat16";
  RowPlan plan;
  ASSERT_TRUE(plan_rows(read(doc), &plan).ok());
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_EQ(plan.outputs[0].dtype, "bfloat16");
  EXPECT_EQ(plan.inputs[0].dtype, "bfloat16");
  // torch's default eps for bfloat16 is its machine epsilon, 2^-7.
  bool eps = false;
  for (const RowLine& line : plan.lines)
    eps = eps || line.text.find("0.0078125f") != std::string::npos;
  EXPECT_TRUE(eps);
  for (const std::string device : {"cpu", "cuda"}) {
    std::string source = row_kernel_source(plan, device);
    EXPECT_NE(source.find("const sa_bf16* __restrict__ in0_data"), std::string::npos);
  }
  // The normalised value comes from a sum taken in another order than torch's: it stays in
  // float32 and is rounded once, when stored.
  for (const RowLine& line : plan.lines) EXPECT_EQ(line.text.find("sa_round"), std::string::npos);
}

TEST(SynthRowPlan, ANarrowMaximumIsRoundedAndANarrowSumIsNot) {
  // Over bfloat16 rows: amax(x * x) is one of the rounded squares; sum(x * x) is added up in
  // another order than torch's, so rounding it could land it a step away from torch's value.
  for (const char* reduction : {"aten.amax.default", "aten.sum.dim_IntList"}) {
    json doc = graph({tensor_input("x", "input", {8, 64})},
                     {node("sq", "aten.mul.Tensor", {ref("x"), ref("x")}, {8, 64}, "bfloat16"),
                      node("r", reduction, {ref("sq"), {1}, true}, {8, 1}, "bfloat16"),
                      node("y", "aten.mul.Tensor", {ref("r"), ref("x")}, {8, 64}, "bfloat16")},
                     {"y"});
    doc["inputs"][0]["dtype"] = "bfloat16";
    RowPlan plan;
    ASSERT_TRUE(plan_rows(read(doc), &plan).ok()) << reduction;
    int rounded = 0;
    for (const RowLine& line : plan.lines)
      rounded += line.text.find("sa_round_bfloat16(") != std::string::npos;
    // The square always; the maximum and the product that reads it only for amax.
    EXPECT_EQ(rounded, reduction == std::string("aten.amax.default") ? 3 : 1) << reduction;
  }
}

TEST(SynthRowPlan, InstanceNormReadsItsWeightsOncePerRow) {
  // instance_norm then relu over NCHW: the mean and variance of each (sample, channel) over H
  // and W, the weight and bias per channel.
  json inputs = {tensor_input("p_w", "parameter", {8}, "norm.weight"),
                 tensor_input("p_b", "parameter", {8}, "norm.bias"),
                 tensor_input("x", "input", {2, 8, 5, 6})};
  json args = {ref("x"), ref("p_w"), ref("p_b"), nullptr, nullptr, true, 0.1, 1e-5, false};
  Graph g = read(graph(inputs,
                       {node("norm", "aten.instance_norm.default", args, {2, 8, 5, 6}),
                        node("relu", "aten.relu.default", {ref("norm")}, {2, 8, 5, 6})},
                       {"relu"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.passes, 1);
  EXPECT_EQ(plan.first_reduced, 2);
  for (const RowInput& in : plan.inputs) {
    if (g.values[in.value].name == "x") continue;
    EXPECT_EQ(in.dims, std::vector<int>{1});
    EXPECT_FALSE(in.per_element);
  }

  // With running statistics it is not a reduction: refused, saying so.
  args[5] = false;
  g = read(graph(inputs,
                 {node("norm", "aten.instance_norm.default", args, {2, 8, 5, 6}),
                  node("relu", "aten.relu.default", {ref("norm")}, {2, 8, 5, 6})},
                 {"relu"}));
  s = plan_rows(g, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("with running statistics"), std::string::npos) << s.message();
}

TEST(SynthRowPlan, AnInputBroadcastAlongPartOfTheRowIsReadAtAnIndexOfItsOwn) {
  // A group norm's affine map in (N, G, C / G, H, W): the weight (G, C / G, 1, 1) varies along
  // the row's first reduced dim only, so element k of a row reads it at (k / (H * W)) % (C / G).
  json inputs = {tensor_input("x", "input", {2, 4, 3, 5, 6}),
                 tensor_input("w", "input", {4, 3, 1, 1}),
                 tensor_input("b", "input", {4, 3, 5, 6})};
  json args = {ref("x"), nullptr, nullptr, nullptr, nullptr, true, 0.0, 1e-5, false};
  Graph g = read(graph(inputs,
                       {node("norm", "aten.instance_norm.default", args, {2, 4, 3, 5, 6}),
                        node("mul", "aten.mul.Tensor", {ref("norm"), ref("w")}, {2, 4, 3, 5, 6}),
                        node("add", "aten.add.Tensor", {ref("mul"), ref("b")}, {2, 4, 3, 5, 6})},
                       {"add"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  std::map<std::string, RowInput> by_name;
  for (const RowInput& in : plan.inputs) by_name[g.values[in.value].name] = in;
  EXPECT_TRUE(by_name["w"].per_element && by_name["w"].segmented);
  EXPECT_TRUE(by_name["b"].per_element && !by_name["b"].segmented);  // covers the whole row
  EXPECT_FALSE(by_name["x"].segmented);

  const std::string w = "in" + std::to_string(std::find_if(plan.inputs.begin(), plan.inputs.end(),
                                                           [&](const RowInput& in) {
                                                             return in.value == by_name["w"].value;
                                                           }) -
                                              plan.inputs.begin());
  for (const char* device : {"cpu", "cuda"}) {
    const std::string source = row_kernel_source(plan, device);
    EXPECT_NE(source.find("sa_index(k, " + w + "_div_r, " + w + "_mod_r)"), std::string::npos)
        << device;
    EXPECT_NE(source.find("int64_t " + w + "_mod_r"), std::string::npos) << device;
  }
  // On CUDA the walks that read 4 elements at a time read the weight once a run of 4, where
  // it holds its value that long (4 | H * W, checked at run time); the quad walk never runs.
  EXPECT_EQ(by_name["w"].run, 30);  // H * W
  const std::string cuda = row_kernel_source(plan, "cuda");
  EXPECT_NE(cuda.find("sa_index32((uint32_t)k0, (uint32_t)" + w + "_div_r"), std::string::npos);
  // The streamed and clustered walks divide only where a run ends.
  EXPECT_NE(cuda.find("const int64_t r = sa_quot(k0, " + w + "_div_r);"), std::string::npos);
  EXPECT_NE(cuda.find(w + "_div_r % 4 == 0"), std::string::npos);
  EXPECT_NE(cuda.find("return launch_streamed<"), std::string::npos);
  EXPECT_EQ(cuda.find("return launch_quads<"), std::string::npos);
  // Runs of 30 at capture: the tuner tries strided shapes alone.
  for (const KernelConfig& c : row_configs(plan, "cuda")) {
    EXPECT_EQ(c.label.find("threads x"), std::string::npos) << c.label;  // not a cached shape
    EXPECT_EQ(c.label.find("a row a block"), std::string::npos) << c.label;
  }
  // model_new.py passes (div_r, mod_r) after the other inputs' layouts.
  const std::string model = row_model_source(g, plan);
  EXPECT_NE(model.find("SEGMENTED = ("), std::string::npos);
  EXPECT_NE(model.find("* " + std::to_string(3 + 7 * plan.inputs.size() + 2)), std::string::npos);
}

TEST(SynthRowPlan, AWeightHeldForRunsOf4TakesTheWalksThatRead4AtATime) {
  // The same group norm's affine map with H * W = 24: the tuner's shapes read 4 at a time, and
  // mean and variance come in one pass, so the row is read once and written once.
  json inputs = {tensor_input("x", "input", {2, 4, 3, 4, 6}),
                 tensor_input("w", "input", {4, 3, 1, 1})};
  json args = {ref("x"), nullptr, nullptr, nullptr, nullptr, true, 0.0, 1e-5, false};
  Graph g = read(graph(inputs,
                       {node("norm", "aten.instance_norm.default", args, {2, 4, 3, 4, 6}),
                        node("mul", "aten.mul.Tensor", {ref("norm"), ref("w")}, {2, 4, 3, 4, 6})},
                       {"mul"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(plan.passes, 1);
  const std::vector<KernelConfig> configs = row_configs(plan, "cuda");
  ASSERT_FALSE(configs.empty());
  EXPECT_NE(configs[0].label.find("threads x"), std::string::npos) << configs[0].label;
}

TEST(SynthRowPlan, ACausalMaskIsABoolInputAndMaskedScoresAreMinusInfinity) {
  // softmax(scores.masked_fill(mask, -inf)): the bool mask (seq, seq) is read along each row as
  // 1 or 0, and capture's "-inf" (JSON has no infinity) is the literal INFINITY, negated.
  json mask = tensor_input("b_mask", "buffer", {6, 6}, "causal_mask");
  mask["dtype"] = "bool";
  Graph g = read(graph(
      {mask, tensor_input("scores", "input", {4, 6, 6})},
      {node("fill", "aten.masked_fill.Scalar", {ref("scores"), ref("b_mask"), "-inf"}, {4, 6, 6}),
       node("softmax", "aten.softmax.int", {ref("fill"), -1}, {4, 6, 6})},
      {"softmax"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(plan.inputs.size(), 2u);
  const auto mask_input = std::find_if(plan.inputs.begin(), plan.inputs.end(),
                                       [&](const RowInput& in) { return in.dtype == "bool"; });
  ASSERT_NE(mask_input, plan.inputs.end());
  EXPECT_EQ(g.values[mask_input->value].name, "b_mask");
  EXPECT_TRUE(mask_input->per_element);
  const auto fill = std::find_if(plan.lines.begin(), plan.lines.end(), [](const RowLine& l) {
    return l.text.find("!= 0.0f ? (-INFINITY) : ") != std::string::npos;
  });
  EXPECT_NE(fill, plan.lines.end());
  for (const char* device : {"cpu", "cuda"}) {
    const std::string source = row_kernel_source(plan, device);
    EXPECT_NE(source.find("const bool* __restrict__ in"), std::string::npos) << device;
    EXPECT_NE(source.find("float sa_load(bool x)"), std::string::npos) << device;
  }
}

TEST(SynthRowPlan, ReductionsOverDifferentDimsAreRefusedWithTheReason) {
  Graph g = read(graph({tensor_input("x", "input", {8, 16})},
                       {node("s0", "aten.sum.dim_IntList", {ref("x"), {1}, true}, {8, 1}),
                        node("sub", "aten.sub.Tensor", {ref("x"), ref("s0")}, {8, 16}),
                        node("s1", "aten.sum.dim_IntList", {ref("sub"), {0}}, {16})},
                       {"s1"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reduces other dims"), std::string::npos) << s.message();
}

TEST(SynthRowPlan, AGraphWithoutAReductionIsNotARowPlan) {
  Graph g = read(graph({tensor_input("x", "input", {8, 16})},
                       {node("relu", "aten.relu.default", {ref("x")}, {8, 16})}, {"relu"}));
  RowPlan plan;
  Status s = plan_rows(g, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reduces nothing"), std::string::npos);
}

TEST(SynthRowPlan, TheTunerAlsoTriesDeepShapesThatCoverTheRowWithoutIdleThreads) {
  // 4096 elements a row: by default 256 threads of 4 runs; the tuner also tries 64 threads of
  // 16 runs and 128 of 8 (more rows resident), and the kernel has a case for each.
  RowPlan softmax;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 4096)), &softmax).ok());
  const auto configs = row_configs(softmax, "cuda");
  std::vector<std::string> labels;
  for (const KernelConfig& c : configs) labels.push_back(c.label);
  EXPECT_EQ(labels.front(), "rows 1 x 256 threads x 4 runs of 4");
  auto tried = [&](const std::string& label) {
    return std::find(labels.begin(), labels.end(), label) != labels.end();
  };
  EXPECT_TRUE(tried("rows 1 x 64 threads x 16 runs of 4"));
  EXPECT_TRUE(tried("rows 1 x 128 threads x 8 runs of 4"));
  const std::string source = row_kernel_source(softmax, "cuda");
  expect_a_case_for_each(source, configs, "if (cached && R <= ");
  // A row of 1000 is not given a deep shape that leaves most of its threads idle.
  RowPlan short_rows;
  ASSERT_TRUE(plan_rows(read(scaled_softmax(64, 1000)), &short_rows).ok());
  for (const KernelConfig& c : row_configs(short_rows, "cuda")) {
    EXPECT_EQ(c.label.find("16 runs"), std::string::npos) << c.label;
  }
}

TEST(SynthRowPlan, AViewIsReadInPlaceWhereEachGroupOfItsDimsIsOneRunOfMemory) {
  // Sums over dim 1 of (4, 6, 8): groups (4), (6), (8); over dim 0: (), (4), (6, 8).
  const auto plan_of = [](int dim) {
    RowPlan plan;
    const std::vector<std::int64_t> out =
        dim == 1 ? std::vector<std::int64_t>{4, 8} : std::vector<std::int64_t>{6, 8};
    EXPECT_TRUE(
        plan_rows(read(graph({tensor_input("x", "input", {4, 6, 8})},
                             {node("s", "aten.sum.dim_IntList", {ref("x"), {dim}}, out)}, {"s"})),
                  &plan)
            .ok());
    return plan;
  };
  const auto typed = [](std::vector<std::int64_t> stride) {
    TensorType t;
    t.shape = {4, 6, 8};
    t.stride = std::move(stride);
    return t;
  };
  const RowPlan middle = plan_of(1), first = plan_of(0);
  // Half of a (4, 6, 16) chunked along the last dim: rows 16 apart.
  EXPECT_TRUE(rows_read_in_place(middle, 0, typed({96, 16, 1})));
  EXPECT_FALSE(rows_read_in_place(first, 0, typed({96, 16, 1})));  // (6, 8) is not one run
  // Permuted dims read through their strides, each alone in its group.
  EXPECT_TRUE(rows_read_in_place(middle, 0, typed({1, 4, 24})));
  EXPECT_FALSE(rows_read_in_place(first, 0, typed({1, 4, 24})));
  EXPECT_TRUE(rows_read_in_place(first, 0, typed({1, 32, 4})));  // (6, 8) one run, 4 apart
  EXPECT_TRUE(rows_read_in_place(first, 0, typed({48, 8, 1})));  // contiguous
}

TEST(SynthRowPlan, RowsOfAFewElementsAreTakenAThreadARow) {
  const auto configs_of = [](std::int64_t length) {
    RowPlan plan;
    EXPECT_TRUE(
        plan_rows(read(graph({tensor_input("x", "input", {4096, length})},
                             {node("s", "aten.sum.dim_IntList", {ref("x"), {1}}, {4096})}, {"s"})),
                  &plan)
            .ok());
    std::vector<std::string> labels;
    for (const KernelConfig& c : row_configs(plan, "cuda")) labels.push_back(c.label);
    const std::string source = row_kernel_source(plan, "cuda");
    EXPECT_NE(source.find("if (I == 1 && R <= 16) return launch_strided<512, 1>("),
              std::string::npos);
    return labels;
  };
  // Up to 16 a thread a row by default (what the launcher takes), the warp a row tried after.
  for (std::int64_t length : {4, 10, 16}) {
    const auto labels = configs_of(length);
    ASSERT_GE(labels.size(), 2u) << length;
    EXPECT_EQ(labels[0], "rows 512 x 1 threads") << length;
    EXPECT_EQ(labels[1], "rows 256 x 2 threads") << length;
    const bool cached = length % 4 == 0;
    EXPECT_EQ(std::count(labels.begin(), labels.end(), "rows 4 x 32 threads x 1 runs of 4"),
              cached ? 1 : 0)
        << length;
  }
  // Up to 64 the cached walk by default, a thread a row tried too.
  const auto longer = configs_of(64);
  EXPECT_EQ(longer[0], "rows 4 x 32 threads x 1 runs of 4");
  EXPECT_EQ(std::count(longer.begin(), longer.end(), "rows 512 x 1 threads"), 1);
  const auto longest = configs_of(128);
  EXPECT_EQ(std::count(longest.begin(), longest.end(), "rows 512 x 1 threads"), 0);
}

}  // namespace
}  // namespace cuda_agent::synth
