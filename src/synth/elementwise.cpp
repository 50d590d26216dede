#include "synth/elementwise.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <utility>

#include "synth/expression.h"
#include "synth/model_source.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

/// (inner, count) indexing is possible when the input's sizes that are not 1, right-aligned to
/// the output's, form one run equal to the output's sizes there.
bool broadcast_run(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& out) {
  if (shape.size() > out.size()) return false;
  std::size_t offset = out.size() - shape.size();
  int first = -1, last = -1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (shape[k] != out[offset + k]) return false;
    if (first < 0) first = static_cast<int>(k);
    last = static_cast<int>(k);
  }
  for (int k = first; first >= 0 && k <= last; ++k) {
    if (shape[k] == 1 && out[offset + k] != 1) return false;  // a gap in the run
  }
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s;
  for (auto d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + ")";
}

/// Elements a CUDA vector holds: 8 (16 bytes) when every tensor is 16-bit, else 4 (16 bytes of
/// float32).
int vector_lanes(const ElementwisePlan& plan) {
  bool narrow = plan.output_dtype != "float32";
  for (const std::string& dtype : plan.input_dtypes) narrow = narrow && dtype != "float32";
  return narrow ? 8 : 4;
}

/// The vectors a CUDA thread may take (configs 0..2 and 3..5): one, where the body is cheap, so
/// that the most threads keep loads in flight, or four, where the body is costly and a thread's
/// fixed cost (its tile's position, its rows' start) is better spread over more elements.
constexpr int kUnrolls[] = {1, 4};

/// Rough instruction counts of the math a body calls (CUDA's float functions), and the most
/// a thread's vector may cost and still be one vector a thread. On an H200, one vector a thread
/// ran relu, sigmoid (about 64 instructions a vector), tanh and elu faster than four did
/// (1.03 vs 1.13 ms, 1.08 vs 1.24, 1.08 vs 1.10, 1.21 vs 1.25), and gelu (erff, about 116) and
/// bfloat16 silu (8 elements a vector, about 128) slower (1.22 vs 1.09, 1.39 vs 1.15).
constexpr std::pair<const char*, int> kCallCosts[] = {
    {"erff(", 25}, {"tanhf(", 20}, {"expf(", 10}, {"logf(", 15},  {"log1pf(", 20}, {"powf(", 40},
    {"sinf(", 20}, {"cosf(", 20},  {"sqrtf(", 8}, {"sa_div(", 3}, {" / ", 10}};
constexpr int kCheapVector = 100;
/// The floats a thread may hold loaded at once: a 512-thread block leaves each thread 128
/// registers. The kernel loads every input's vectors before it computes, so inputs x vectors x
/// lanes past this spill to local memory: the unrolled GRU's gate kernel with its two biases'
/// pieces (13 inputs) at four vectors of four a thread spilled 1.7 KB a thread (ptxas -v) and
/// took 34 us a step where it had taken 4.6 with 7 inputs (H200).
constexpr int kLoadRegisters = 128;

/// row_layout's (inner, count) of an input of shape broadcast to out: the output's elements
/// after the input's last dim that is not 1, and the input's elements.
std::pair<std::int64_t, std::int64_t> broadcast_span(const std::vector<std::int64_t>& out,
                                                     const std::vector<std::int64_t>& shape) {
  const std::size_t offset = out.size() - shape.size();
  std::size_t last = 0;  // one past it, in out's dims
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] != 1) last = offset + k + 1;
  }
  std::int64_t inner = 1;
  for (std::size_t d = last; d < out.size(); ++d) inner *= out[d];
  return {inner, std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>())};
}

/// The runs of rows the kernel walks input k in: 1 but for a view read in place whose rows make
/// several.
int input_groups(const ElementwisePlan& plan, std::size_t k) {
  return k < plan.input_groups.size() ? plan.input_groups[k] : 1;
}

/// Whether a thread's four vectors of every input fit its registers (else they spill).
bool four_vectors_fit(const ElementwisePlan& plan, int lanes) {
  return static_cast<int>(plan.inputs.size()) * lanes * kUnrolls[1] <= kLoadRegisters;
}

int default_unroll(const ElementwisePlan& plan, int lanes) {
  if (!four_vectors_fit(plan, lanes)) return kUnrolls[0];
  int cost = 0;
  // Lines with one value a row count too: on an H200, a batch norm whose 1 / sqrt(var + eps)
  // was computed once a thread still ran slower at one vector a thread than at four
  // (level1/023: 1.84 ms, against 1.61 at four vectors computing it per element).
  for (const std::string& line : plan.lines) {
    cost += 2;  // the op itself: a multiply, a compare, a select
    for (const auto& [call, instructions] : kCallCosts) {
      for (auto at = line.find(call); at != std::string::npos; at = line.find(call, at + 1))
        cost += instructions;
    }
  }
  return cost * lanes <= kCheapVector ? kUnrolls[0] : kUnrolls[1];
}

using Dims = std::vector<std::pair<std::int64_t, std::int64_t>>;  // (size, stride)

/// t's dims but those of size 1, which no layout depends on.
Dims sized_dims(const TensorType& t) {
  Dims dims;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] != 1) dims.emplace_back(t.shape[d], t.stride[d]);
  }
  return dims;
}

/// The runs of evenly spaced elements the first count of dims make (a dim whose stride is the
/// next one's stride times that one's size continues its run), at least 1.
int runs(const Dims& dims, std::size_t count) {
  int made = 1;
  for (std::size_t d = 0; d + 1 < count; ++d) {
    if (dims[d].second != dims[d + 1].second * dims[d + 1].first) ++made;
  }
  return made;
}

}  // namespace

Status plan_elementwise(const Graph& graph, ElementwisePlan* plan) {
  ElementwisePlan p;
  std::vector<std::string> problems;
  if (graph.outputs.size() != 1) {
    problems.push_back("it returns " + std::to_string(graph.outputs.size()) + " values, not one");
  }
  std::map<int, std::string> variable;  // value -> its expression in the kernel body
  std::set<int> inexact;                // values whose float32 bits may differ from torch's
  std::vector<std::vector<int>> reads;  // per line: the values it reads
  std::map<int, std::size_t> line_of;   // op value -> its line
  for (const Op& op : graph.ops) {
    const Value& v = graph.values[op.value];
    if (!is_elementwise_op(op.name)) {
      problems.push_back(op.target + " is not an elementwise op the fused kernel writes");
      continue;
    }
    if (v.results.size() != 1 || !is_float_dtype(v.results[0].dtype)) {
      problems.push_back(op.target + " makes " +
                         (v.results.empty() ? "no tensor" : v.results[0].dtype) +
                         ", not one float32, bfloat16 or float16 tensor");
      continue;
    }
    std::vector<std::string> operands;
    std::string problem;
    bool missing = false;  // an operand the plan cannot read: said once, where it was found
    bool exact = rounds_exactly(op);
    std::vector<int> line_reads;
    // Operands by argument position: a value's variable, or "" for a scalar.
    for (std::size_t i = 0; op.args.is_array() && i < op.args.size(); ++i) {
      const json& a = op.args[i];
      std::string expression;
      if (a.is_object() && a.contains("ref")) {
        int index = graph.find(a["ref"].get<std::string>());
        const Value& input = graph.values[index];
        if (!variable.count(index)) {
          if (input.kind == "op") {
            problems.push_back(op.target + " reads " + input.name +
                               ", which the plan has not made");
            missing = true;
            continue;
          }
          if (input.results.size() != 1 || !is_input_dtype(input.results[0].dtype)) {
            problems.push_back("input " + input.name +
                               " is not one float32, bfloat16, float16 or bool tensor");
            missing = true;
            continue;
          }
          variable[index] = "in" + std::to_string(p.inputs.size());
          p.inputs.push_back(index);
          p.input_dtypes.push_back(input.results[0].dtype);
        }
        expression = variable[index];
        exact = exact && !inexact.count(index);
        line_reads.push_back(index);
      }
      operands.push_back(expression);
    }
    if (missing) continue;
    std::string name = "v" + std::to_string(p.lines.size());
    std::string expression = elementwise_expression(op, operands, &problem);
    if (exact) {
      expression = rounded(expression, v.results[0].dtype);
    } else {
      inexact.insert(op.value);
    }
    line_of[op.value] = p.lines.size();
    reads.push_back(line_reads);
    p.lines.push_back("const float " + name + " = " + expression + ";");
    if (!problem.empty()) problems.push_back(problem);
    variable[op.value] = name;
    p.ops.push_back(op.name);
  }
  if (problems.empty() && graph.outputs.size() == 1) {
    const Value& out = graph.values[graph.outputs[0]];
    if (out.kind != "op" || !variable.count(graph.outputs[0])) {
      problems.push_back("its output is not computed by an op");
    } else {
      p.result = variable[graph.outputs[0]];
      p.output_shape = out.results[0].shape;
      p.output_dtype = out.results[0].dtype;
      for (int index : p.inputs) {
        const auto& shape = graph.values[index].results[0].shape;
        p.input_full.push_back(shape == p.output_shape);
        p.input_shapes.push_back(shape);
        // A view read in place, its rows in several runs: the kernel takes each run's place.
        const ElementwiseWalk walk = elementwise_walk(graph.values[index].results[0]);
        p.input_groups.push_back(p.input_full.back() && walk.cols > 0 ? walk.groups : 1);
        if (!broadcast_run(shape, p.output_shape)) {
          problems.push_back("input " + graph.values[index].name + " of shape " +
                             shape_text(shape) + " does not broadcast to " +
                             shape_text(p.output_shape) + " as one run of sizes");
        }
      }
    }
  }
  if (problems.empty()) {
    std::set<int> needed;
    for (std::size_t k = 0; k < p.lines.size(); ++k) {
      bool per_row = !reads[k].empty();
      std::set<int> inputs;
      for (int value : reads[k]) {
        if (auto line = line_of.find(value); line != line_of.end()) {
          per_row = per_row && p.line_per_row[line->second];
          continue;
        }
        auto at = std::find(p.inputs.begin(), p.inputs.end(), value);
        std::size_t position = static_cast<std::size_t>(at - p.inputs.begin());
        per_row = per_row && !p.input_full[position];
        inputs.insert(static_cast<int>(position));
      }
      p.line_per_row.push_back(per_row);
      if (per_row) needed.insert(inputs.begin(), inputs.end());
    }
    p.per_row_inputs.assign(needed.begin(), needed.end());
  }
  if (p.inputs.empty() && problems.empty()) problems.push_back("it reads no tensor");
  if (!problems.empty()) {
    return Status::InvalidArgument("no fused elementwise kernel for this graph:\n  " +
                                   join(problems, "\n  "));
  }
  *plan = std::move(p);
  return Status::OK();
}

/// The CPU kernel: OpenMP over rows; each row handled by fused_row<kSteps>, where bit k of
/// kSteps says at compile time whether input k runs along the row, so that the loop over a row
/// has no per-element choice left and vectorises. Up to kUnswitched inputs get one instance per
/// combination; more take the instance that reads the steps at run time (kSteps = -1).
std::string cpu_rows(const ElementwisePlan& plan, const std::string& params,
                     const std::string& row_setup, const std::string& body) {
  constexpr std::size_t kUnswitched = 4;
  const std::size_t k = plan.inputs.size();
  std::string row_params, row_args, steps, flags;
  for (std::size_t i = 0; i < k; ++i) {
    std::string n = std::to_string(i);
    row_params += "const " + element_type(plan.input_dtypes[i]) + "* __restrict__ row" + n + ", ";
    row_args += "row" + n + ", ";
    steps +=
        std::string(i ? " | " : "") + "(step" + n + " ? " + std::to_string(1u << i) + "u : 0u)";
    flags += "  const bool s" + n + " = kSteps < 0 ? ((steps >> " + n + ") & 1u) : ((kSteps >> " +
             n + ") & 1);\n";
  }
  std::string loop_body = body;
  for (std::size_t i = 0; i < k; ++i) {
    std::string n = std::to_string(i);
    std::string from = "step" + n + " ? row" + n, to = "s" + n + " ? row" + n;
    for (auto at = loop_body.find(from); at != std::string::npos; at = loop_body.find(from)) {
      loop_body.replace(at, from.size(), to);
    }
  }
  std::string out = "template <int kSteps>\nstatic inline void fused_row(" + row_params +
                    element_type(plan.output_dtype) +
                    "* __restrict__ out_row, int64_t cols, unsigned steps) {\n" + flags +
                    "#pragma omp simd\n  for (int64_t c = 0; c < cols; ++c) {\n" + loop_body +
                    "  }\n}\n\n";
  out += "extern \"C\" int fused_elementwise(" + params + ", void* /*stream*/) {\n";
  out += "  sa_apply_config();\n";
  out += "  const unsigned steps = " + (k ? steps : std::string("0u")) + ";\n";
  out += "#pragma omp parallel for schedule(runtime)\n  for (int64_t r = 0; r < rows; ++r) {\n" +
         row_setup + "    " + element_type(plan.output_dtype) +
         "* out_row = out + r * out_pitch;\n    switch (steps) {\n";
  if (k <= kUnswitched) {
    for (unsigned mask = 0; mask < (1u << k); ++mask) {
      out += "      case " + std::to_string(mask) + "u: fused_row<" + std::to_string(mask) + ">(" +
             row_args + "out_row, cols, steps); break;\n";
    }
  }
  out += "      default: fused_row<-1>(" + row_args + "out_row, cols, steps);\n";
  out += "    }\n  }\n  return 0;\n}\n";
  return out;
}

std::string elementwise_kernel_source(const ElementwisePlan& plan, const std::string& device) {
  const bool cuda = device == "cuda";
  // The output is walked as rows of `cols` elements, out_pitch apart (cols, or a view's row
  // stride for a view written in place); in a row, each input is either a run of cols
  // contiguous elements (step 1) or one element (step 0), starting at ((r / div) % mod) *
  // pitch: cols for contiguous memory, a view's row stride for a view read in place, 1 for one
  // element.
  std::string params, args, row_setup, loads;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    std::string n = std::to_string(k);
    params += "const " + element_type(plan.input_dtypes[k]) + "* __restrict__ in" + n + "_data, ";
    args += "in" + n + "_data, ";
  }
  params += element_type(plan.output_dtype) +
            "* __restrict__ out, int64_t rows, int64_t cols, int64_t out_pitch";
  args += "out, rows, cols, out_pitch";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    std::string n = std::to_string(k);
    params +=
        ", int64_t div" + n + ", int64_t mod" + n + ", int64_t step" + n + ", int64_t pitch" + n;
    args += ", div" + n + ", mod" + n + ", step" + n + ", pitch" + n;
    std::string start = "sa_index(r, div" + n + ", mod" + n + ") * pitch" + n;
    // A view whose rows make several runs (heads transposed): row r's place in each further
    // run, that run's stride apart.
    for (int g = 1; g < input_groups(plan, k); ++g) {
      const std::string m = n + "_" + std::to_string(g);
      params += ", int64_t div" + m + ", int64_t mod" + m + ", int64_t stride" + m;
      args += ", div" + m + ", mod" + m + ", stride" + m;
      start += " + sa_index(r, div" + m + ", mod" + m + ") * stride" + m;
    }
    row_setup += "    const " + element_type(plan.input_dtypes[k]) + "* row" + n + " = in" + n +
                 "_data + " + start + ";\n";
    loads += "      const float in" + n + " = sa_load(step" + n + " ? row" + n + "[c] : row" + n +
             "[0]);\n";
  }
  std::string body = loads;
  for (const std::string& line : plan.lines) body += "      " + line + "\n";
  body += "      sa_store(&out_row[c], " + plan.result + ");\n";

  const std::string ops = join(plan.ops, ", ");
  std::string source = "// Generated by cuda-agent's synthesizer: " + ops +
                       ", fused: each input read once, the output written once.\n"
                       "#include <math.h>\n#include <stdint.h>\n";
  const std::string helpers =
      std::string(kExpressionHelpers) + dtype_helpers(device) + kIndexHelper + "\n";
  if (cuda) {
    // A vector's elements at a time where every contiguous input and the output allow it, else 1.
    const int lanes = vector_lanes(plan);
    const std::string width = std::to_string(lanes);
    // Each thread takes U vectors of V elements, blockDim.x * V apart, issuing the loads of
    // every input before it uses any; a block takes one small tile, so the last wave of blocks
    // is short. A broadcast input is read once a row (s<n>) or, where it runs along the row, as
    // used: it is small, so cached.
    std::string constants, vector_loads, body_v, aligned;
    for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
      std::string n = std::to_string(k);
      std::string strides;
      for (int g = 1; g < input_groups(plan, k); ++g) {
        strides += " && stride" + n + "_" + std::to_string(g) + " % " + width + " == 0";
      }
      aligned += " && (!step" + n + " || (sa_aligned<" + width + ">(in" + n + "_data) && pitch" +
                 n + " % " + width + " == 0" + strides + "))";
      if (plan.input_full[k]) {  // always a contiguous run along the row (step 1)
        constants += "    float x" + n + "[U][V];\n";
        vector_loads += "        sa_load_v<V>(row" + n + " + c + u * span, x" + n + "[u]);\n";
        body_v += "        const float in" + n + " = x" + n + "[u][q];\n";
        continue;
      }
      constants += "    const float s" + n + " = step" + n + " ? 0.0f : sa_load(row" + n +
                   "[0]);\n    float y" + n + "[U][V];\n";
      vector_loads +=
          "        if (step" + n + ") sa_load_v<V>(row" + n + " + c + u * span, y" + n + "[u]);\n";
      body_v +=
          "        const float in" + n + " = step" + n + " ? y" + n + "[u][q] : s" + n + ";\n";
    }
    // Lines that read only broadcast inputs have one value a row where those inputs are one
    // element a row (step 0, known at run time): then each thread computes them once, after
    // issuing its vectors' loads (a batch norm's 1 / sqrt(var + eps), say), and the vectors'
    // body reads them.
    std::string per_row_setup, body_per_row = body_v;
    const bool hoists = std::find(plan.line_per_row.begin(), plan.line_per_row.end(), true) !=
                        plan.line_per_row.end();
    if (hoists) {
      std::string condition, computed, kept;
      for (int k : plan.per_row_inputs) {
        const std::string n = std::to_string(k);
        condition += (condition.empty() ? "!step" : " && !step") + n;
        computed += "      const float in" + n + " = s" + n + ";\n";
      }
      for (std::size_t k = 0; k < plan.lines.size(); ++k) {
        const std::string& line = plan.lines[k];
        if (k >= plan.line_per_row.size() || !plan.line_per_row[k]) {
          body_per_row += "        " + line + "\n";
          continue;
        }
        const std::string name = line.substr(12, line.find(" = ") - 12);  // "const float vK = "
        per_row_setup += "    float h" + name + " = 0.0f;\n";
        computed += "      " + line + "\n";
        kept += "      h" + name + " = " + name + ";\n";
        body_per_row += "        const float " + name + " = h" + name + ";\n";
      }
      per_row_setup += "    const bool per_row = " + condition + ";\n    if (per_row) {\n" +
                       computed + kept + "    }\n";
      body_per_row += "        result[q] = " + plan.result + ";\n";
    }
    for (const std::string& line : plan.lines) body_v += "        " + line + "\n";
    body_v += "        result[q] = " + plan.result + ";\n";
    const auto compute_loop = [](const std::string& body, const std::string& indent) {
      return indent + "#pragma unroll\n" + indent + "for (int u = 0; u < U; ++u) {\n" + indent +
             "  if (c + u * span >= cols) break;\n" + indent + "  float result[V];\n" + indent +
             "#pragma unroll\n" + indent + "  for (int q = 0; q < V; ++q) {\n" + body + indent +
             "  }\n" + indent + "  sa_store_v<V>(out_row + c + u * span, result);\n" + indent +
             "}\n";
    };
    const std::string compute =
        hoists ? "    if (per_row) {\n" + compute_loop(body_per_row, "      ") + "    } else {\n" +
                     compute_loop(body_v, "      ") + "    }\n"
               : compute_loop(body_v, "    ");
    source += "#include <cuda_runtime.h>\n\n#define SA_FN static __device__ __forceinline__\n";
    source += helpers + kCudaGridHelper;
    source +=
        "// sa_index in the kernel's index type: 32-bit divisions where the indices fit; none for\n"
        "// a run of one (an input's runs beyond those its view has).\n"
        "SA_FN int32_t sa_ix(int32_t x, int32_t div, int32_t mod) {\n"
        "  return mod == 1 ? 0 : (int32_t)sa_index32(x, div, mod);\n}\n"
        "SA_FN int64_t sa_ix(int64_t x, int64_t div, int64_t mod) {\n"
        "  return mod == 1 ? 0 : sa_index(x, div, mod);\n}\n\n";
    // The kernel's sizes and indices are of type Ix: int32_t where every index fits, which
    // spares each thread 64-bit products and divisions before its first load.
    std::string cuda_row_setup = row_setup, offsets_fit;
    for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
      const std::string n = std::to_string(k);
      offsets_fit += " && mod" + n + " * pitch" + n;
      for (int g = 1; g < input_groups(plan, k); ++g) {
        const std::string m = n + "_" + std::to_string(g);
        offsets_fit += " + mod" + m + " * stride" + m;
      }
      offsets_fit += " <= INT32_MAX - 65536";
    }
    for (std::size_t at = 0; (at = cuda_row_setup.find("sa_index(", at)) != std::string::npos;)
      cuda_row_setup.replace(at, 9, "sa_ix(");
    std::string kernel_params = params;
    for (std::size_t at = 0; (at = kernel_params.find("int64_t ", at)) != std::string::npos;)
      kernel_params.replace(at, 8, "Ix ");
    source +=
        "// The output in tiles of blockDim.y rows by blockDim.x * U vectors of V elements, a "
        "tile\n"
        "// a block (tiles along a row first, so neighbouring blocks read neighbouring memory), U\n"
        "// vectors a thread.\n"
        "template <int V, int U, class Ix>\n"
        "static __global__ void __launch_bounds__(512) fused_elementwise_kernel(" +
        kernel_params +
        ", Ix across, Ix tiles) {\n"
        "  const Ix span = (Ix)blockDim.x * V;\n"
        "  for (Ix t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
        "    const Ix tile_row = sa_ix(t, across, tiles);\n"
        "    const Ix r = tile_row * (Ix)blockDim.y + (Ix)threadIdx.y;\n"
        "    const Ix c = (t - tile_row * across) * span * U + (Ix)threadIdx.x * V;\n"
        "    if (r >= rows || c >= cols) continue;\n" +
        cuda_row_setup + constants + "    " + element_type(plan.output_dtype) +
        "* out_row = out + r * out_pitch;\n"
        "#pragma unroll\n"
        "    for (int u = 0; u < U; ++u) {\n"
        "      if (c + u * span < cols) {\n" +
        vector_loads +
        "      }\n"
        "    }\n" +
        per_row_setup + compute + "  }\n}\n\n";
    const int unroll = default_unroll(plan, lanes);
    // Where four vectors of every input would spill, no configuration takes four (nor is the
    // kernel built for them).
    const bool four = four_vectors_fit(plan, lanes);
    const std::string vectors =
        four ? "for\n// config < 3, " + std::to_string(kUnrolls[0]) + " vector(s) a thread, else " +
                   std::to_string(kUnrolls[1]) + "; or -1: 256 threads and " +
                   std::to_string(unroll) + " vector(s) a\n// thread (by the body's estimated cost)"
             : std::to_string(kUnrolls[0]) +
                   " vector a thread (four of\n// every input would not fit its registers); "
                   "-1: 256 threads";
    source += "// The launch configuration model_new.py chose: 128 << (config % 3) threads and " +
              vectors +
              ".\n"
              "static int sa_config = -1;\n"
              "extern \"C\" int fused_elementwise_config(int64_t config) {\n"
              "  sa_config = config >= 0 && config < 6 ? (int)config : -1;\n"
              "  return 0;\n}\n\n";
    source +=
        "template <int V, int U>\nstatic int launch(" + params +
        ", cudaStream_t stream) {\n"
        "  const int threads = sa_config >= 0 ? 128 << (sa_config % 3) : 256;\n"
        "  // Across a row as many threads as its vectors need (a warp at least), the rest of\n"
        "  // the block on further rows; a block a tile, up to the grid's limit.\n"
        "  int across = 32;\n"
        "  while (across < threads && across * V * U < cols) across *= 2;\n"
        "  const dim3 block(across, threads / across);\n"
        "  const int64_t tiles_across = (cols + across * V * U - 1) / (across * V * U);\n"
        "  const int64_t tiles = tiles_across * ((rows + block.y - 1) / block.y);\n"
        "  // 32-bit indices where the output's and every input's offsets fit (rows pitch\n"
        "  // apart) with room for a tile's overshoot past a row's end, and the tiles' with room\n"
        "  // for the grid's stride.\n"
        "  if (rows * cols <= INT32_MAX - 65536 && rows * out_pitch <= INT32_MAX - 65536" +
        offsets_fit +
        " &&\n"
        "      tiles < (INT64_C(1) << 30))\n"
        "    fused_elementwise_kernel<V, U, int32_t><<<sa_grid(tiles), block, 0, stream>>>(" +
        args +
        ", tiles_across, tiles);\n"
        "  else\n"
        "    fused_elementwise_kernel<V, U, int64_t><<<sa_grid(tiles), block, 0, stream>>>(" +
        args +
        ", tiles_across, tiles);\n"
        "  return (int)cudaGetLastError();\n}\n\n"
        "template <int V>\nstatic int launch_v(" +
        params + ", cudaStream_t stream) {\n";
    if (four) {
      source += "  const int unroll = sa_config >= 0 ? (sa_config < 3 ? " +
                std::to_string(kUnrolls[0]) + " : " + std::to_string(kUnrolls[1]) +
                ") : " + std::to_string(unroll) +
                ";\n  if (unroll == " + std::to_string(kUnrolls[1]) + ") return launch<V, " +
                std::to_string(kUnrolls[1]) + ">(" + args + ", stream);\n";
    }
    source +=
        "  return launch<V, " + std::to_string(kUnrolls[0]) + ">(" + args + ", stream);\n}\n\n";
    source += "extern \"C\" int fused_elementwise(" + params +
              ", void* stream) {\n"
              "  if (rows == 0 || cols == 0) return 0;\n"
              "  cudaStream_t s = (cudaStream_t)stream;\n"
              "  // Rows start at multiples of their pitch, so " +
              width + " | cols, " + width +
              " | each pitch and aligned bases align every row.\n"
              "  if (cols % " +
              width + " == 0 && sa_aligned<" + width + ">(out) && out_pitch % " + width + " == 0" +
              aligned + ") return launch_v<" + width + ">(" + args +
              ", s);\n"
              "  return launch_v<1>(" +
              args + ", s);\n}\n";
  } else {
    source += "#include <omp.h>\n\n#define SA_FN static inline\n";
    source += helpers + cpu_config_source("fused_elementwise");
    source += cpu_rows(plan, params, row_setup, body);
  }
  return source;
}

std::string elementwise_model_source(const Graph& graph, const ElementwisePlan& plan) {
  const std::string ops = join(plan.ops, ", ");
  std::string s = "\"\"\"Generated by cuda-agent's synthesizer: " + ops +
                  " in one fused kernel (kernels/).\"\"\"\n\n"
                  "import math\n\nimport torch\nimport torch.nn as nn\n\n" +
                  std::string(reads_views(graph, plan.inputs) ? "import synth_piece\n" : "") +
                  "from utils.kernels import load\n\n"
                  "lib = load()\nfused_elementwise = lib.bind(\"fused_elementwise\", ";
  for (std::size_t k = 0; k <= plan.inputs.size(); ++k) s += "\"tensor\", ";
  s += "\"i64\", \"i64\", \"i64\"";
  std::string groups;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    s += ", \"i64\", \"i64\", \"i64\", \"i64\"";
    for (int g = 1; g < input_groups(plan, k); ++g) s += ", \"i64\", \"i64\", \"i64\"";
    groups += std::to_string(input_groups(plan, k)) + ", ";
  }
  s += ", \"stream\")\n" + model_config_source("fused_elementwise") + "\n\n";
  s += "def broadcast_shape(*shapes):\n"
       "    \"\"\"The shape the inputs broadcast to (numpy's rule), from their sizes alone.\"\"\"\n"
       "    rank = max(len(shape) for shape in shapes)\n"
       "    out = [1] * rank\n"
       "    for shape in shapes:\n"
       "        for k, size in enumerate(shape):\n"
       "            position = rank - len(shape) + k\n"
       "            if size != 1:\n"
       "                out[position] = size\n"
       "    return out\n\n\n"
       "# The runs of rows the kernel walks each input in (a view read in place whose rows lie\n"
       "# in several runs, as heads transposed out of a projection do, has more than one).\n"
       "GROUPS = [" +
       groups +
       "]\n"
       "OUT_DTYPE = torch." +
       plan.output_dtype + "\n" +
       R"(MAX_COLS = 16384


def rows_of(shape, stride, groups=1):
    """How the kernel walks a tensor of shape and stride: 0 where its memory is contiguous;
    (cols, runs) for a view whose trailing dims are contiguous, cols elements a row, and whose
    leading dims make at most groups runs of evenly spaced rows, each (rows, elements from one
    to the next), outermost first (a slice, a chunk, a select or a narrow of a contiguous
    tensor is one run; heads transposed out of a projection are two); None for any other
    layout."""
    dims = [(size, step) for size, step in zip(shape, stride) if size != 1]
    cols, lead = 1, len(dims)
    while lead and dims[lead - 1][1] == cols:
        lead -= 1
        cols *= dims[lead][0]
    if lead == 0:
        return 0
    runs = []
    for size, step in dims[:lead]:
        if runs and runs[-1][1] == step * size:
            runs[-1] = (runs[-1][0] * size, step)
        else:
            runs.append((size, step))
    return (cols, runs) if cols > 1 and len(runs) <= groups else None


def run_of(shape, stride):
    """The elements from one to the next of a tensor whose dims that are not 1 are one run of
    evenly spaced elements (1 in contiguous memory; for a column of a matrix, its row length),
    or None."""
    dims = [(size, step) for size, step in zip(shape, stride) if size != 1]
    if any(a[1] != b[1] * b[0] for a, b in zip(dims, dims[1:])):
        return None
    return dims[-1][1] if dims else 1


def row_layout(shapes, strides, out, target=None):
    """How the kernel walks out: (rows, cols, out_pitch, [per input: div, mod, step and pitch,
    then div, mod and stride of each further run of its rows, GROUPS[k] runs in all]). Rows
    are the longest run of out's trailing sizes across which every input is either contiguous
    (step 1, starting at row (r // div) % mod) or constant (step 0, its element at (r // div) %
    mod, a run's spacing apart). A view read in place has out's shape, and the kernel's rows
    are its rows (row r of a run at (r // div) % mod of them); so are those of out where it is
    written in place, into a view of these strides (target)."""
    total = math.prod(out)
    spans, walks, runs = [], [], []
    for k, (shape, stride) in enumerate(zip(shapes, strides)):
        offset = len(out) - len(shape)
        last = max((offset + j for j, size in enumerate(shape) if size != 1), default=-1)
        spans.append((math.prod(out[last + 1:]), math.prod(shape)))
        if list(shape) == list(out):
            walk, run = rows_of(shape, stride, GROUPS[k]), 1
        else:
            walk, run = 0, run_of(shape, stride)
        if walk is None or run is None:
            raise ValueError(f"the kernel cannot read a tensor of shape {tuple(shape)} "
                             f"and strides {tuple(stride)} in place")
        walks.append(walk)
        runs.append(run)
    written = 0 if target is None else rows_of(out, target)
    if written is None or (written and written[1][0][1] < written[0]):  # rows overlapping
        raise ValueError(f"the kernel cannot write a tensor of shape {tuple(out)} and strides "
                         f"{tuple(target)} in place")
    viewed = {walk[0] for walk in walks + [written] if walk}  # the row lengths views allow
    if len(viewed) > 1:
        raise ValueError(f"views of rows of {sorted(viewed)} elements: the kernel walks one")
    # Row lengths to try: out's trailing products and their halvings, longest first up to
    # MAX_COLS (rows enough to spread over every core or multiprocessor).
    candidates = {1}
    for split in range(len(out)):
        cols = math.prod(out[split:])
        while cols > 1:
            candidates.add(cols)
            if cols % 2:
                break
            cols //= 2
    fits = viewed or [c for c in candidates if c <= MAX_COLS] or [min(candidates)]
    for cols in sorted(fits, reverse=True):
        layout = []
        for k, ((inner, count), walk, run) in enumerate(zip(spans, walks, runs)):
            more = (1, 1, 0) * (GROUPS[k] - 1)  # runs the input does not have
            if walk:
                sizes = [size for size, _ in walk[1]]
                entries = [(math.prod(sizes[g + 1:]), size, step)
                           for g, (size, step) in enumerate(walk[1])]
                first, rest = entries[0], [n for entry in entries[1:] for n in entry]
                layout.append((first[0], first[1], 1, first[2], *rest,
                               *more[len(rest):]))
            elif inner == 1 and count % cols == 0 and run == 1:
                layout.append((1, count // cols, 1, cols, *more))
            elif inner % cols == 0:
                layout.append((inner // cols, count, 0, run, *more))
            else:
                break
        if len(layout) == len(spans):
            return total // cols, cols, written[1][0][1] if written else cols, layout
    if viewed:
        raise ValueError(f"no rows of {out} suit the inputs of shapes {shapes}")
    # One element a row.
    return total, 1, 1, [(inner, count, 0, run, *(1, 1, 0) * (GROUPS[k] - 1))
                         for k, ((inner, count), run) in enumerate(zip(spans, runs))]


def launch_sizes(shapes, strides, target):
    """out's shape and the kernel's sizes after it (rows, cols and out_pitch, then each input's
    walk, as row_layout lays it out) for inputs of these shapes and strides; target: None, or
    the shape, strides and dtype of the tensor the caller was given to write."""
    if target is not None and target[2] != OUT_DTYPE:
        written = str(OUT_DTYPE).removeprefix("torch.")
        raise ValueError(f"cannot write {written} into {target[2]}")
    out = broadcast_shape(*shapes)
    if target is not None and list(target[0]) != list(out):
        raise ValueError(f"cannot write a result of shape {tuple(out)} into one of shape "
                         f"{tuple(target[0])}")
    rows, cols, out_pitch, layout = row_layout(shapes, strides, out,
                                               None if target is None else target[1])
    return out, (rows, cols, out_pitch, *[n for entry in layout for n in entry])


)";

  // out: a tensor (a slice of a cat's result, say) to write the result into, in place of a
  // new one.
  s += model_class_head(graph, plan.inputs, kLayoutMemoInit, /*viewed=*/true, ", out=None") +
       "        target = None if out is None else (out.shape, out.stride(), out.dtype)\n" +
       layout_memo_lines("out_shape, sizes", "launch_sizes", "target") +
       "        if out is None:\n"
       "            out = torch.empty(out_shape, dtype=OUT_DTYPE, device=inputs[0].device)\n"
       "        fused_elementwise(*inputs, out, *sizes)\n"
       "        return out" +
       graph.output_view + "\n";
  return s;
}

ElementwiseWalk elementwise_walk(const TensorType& t) {
  if (t.stride.empty()) return {};  // not recorded: as made
  if (t.stride.size() != t.shape.size()) return {-1, 0, 0};
  const Dims dims = sized_dims(t);
  std::int64_t cols = 1;
  std::size_t lead = dims.size();
  while (lead > 0 && dims[lead - 1].second == cols) cols *= dims[--lead].first;
  if (lead == 0) return {};
  if (cols == 1) return {-1, 0, 0};
  return {cols, runs(dims, lead), dims[lead - 1].second};
}

bool elementwise_reads_broadcast_in_place(const ElementwisePlan& plan, std::size_t k,
                                          const TensorType& t, std::int64_t cols) {
  if (k >= plan.input_shapes.size() || plan.input_full[k]) return false;
  if (t.stride.size() != t.shape.size()) return t.stride.empty();
  const Dims dims = sized_dims(t);
  if (runs(dims, dims.size()) != 1) return false;
  const std::int64_t inner = broadcast_span(plan.output_shape, plan.input_shapes[k]).first;
  return inner > 1 && (cols == 0 || inner % cols == 0);
}

bool elementwise_rows_fit(const ElementwisePlan& plan, std::int64_t cols) {
  if (cols <= 0) return false;
  const auto& out = plan.output_shape;
  for (const auto& shape : plan.input_shapes) {
    const auto [inner, count] = broadcast_span(out, shape);
    if (!((inner == 1 && count % cols == 0) || inner % cols == 0)) return false;
  }
  return true;
}

Status synthesize_elementwise(const Graph& graph, const std::string& device, Candidate* candidate) {
  ElementwisePlan plan;
  if (Status s = plan_elementwise(graph, &plan); !s.ok()) return s;
  const std::string kernel = elementwise_kernel_source(plan, device);
  candidate->files["model_new.py"] = elementwise_model_source(graph, plan);
  if (reads_views(graph, plan.inputs)) candidate->files["synth_piece.py"] = kPieceModule;
  candidate
      ->files[device == "cuda" ? "kernels/fused_elementwise.cu" : "kernels/fused_elementwise.cpp"] =
      kernel;
  if (device == "cuda") {
    // By default 256 threads and the vectors the body's cost gives; then the other count of
    // vectors, where four fit the registers, and 512 threads.
    const int lanes = vector_lanes(plan);
    const int unroll = default_unroll(plan, lanes);
    const int other = unroll == kUnrolls[0] ? 1 : 0;  // index in kUnrolls
    const auto label = [](int threads, int vectors) {
      return std::to_string(threads) + " threads, " + std::to_string(vectors) +
             (vectors == 1 ? " vector" : " vectors") + " each";
    };
    candidate->configs = {{-1, label(256, unroll)}};
    if (four_vectors_fit(plan, lanes))
      candidate->configs.push_back({3 * other + 1, label(256, kUnrolls[other])});
    candidate->configs.push_back({3 * (1 - other) + 2, label(512, unroll)});
  } else {
    candidate->configs = cpu_schedules();
  }
  candidate->pattern = sha256_hex(kernel);
  long long total = 1;
  for (std::int64_t size : plan.output_shape) total *= size;
  candidate->shape_class = size_class(total) + " elements";
  return Status::OK();
}

}  // namespace cuda_agent::synth
