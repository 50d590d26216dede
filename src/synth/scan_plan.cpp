#include "synth/scan_plan.h"

#include <algorithm>
#include <set>

#include "synth/expression.h"
#include "synth/model_source.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

constexpr int kRank = 6;  // the kernel's dims: F padded on the left
// The fewest elements after the scanned dim at which a CUDA block takes neighbouring rows, a
// lane each: 8 floats fill the 32-byte sector a read moves.
constexpr std::int64_t kAcrossFrom = 8;

std::string n(std::size_t k) { return std::to_string(k); }

/// The expression of an arange over the scanned dim at element k: start + step * k, or "" (a
/// problem said) for an arange that is no such float position.
std::string position(const Graph& graph, const Op& op, const ScanPlan& plan,
                     std::vector<std::string>* problems, bool* exact) {
  const auto& results = graph.values[op.value].results;
  if (results.size() != 1 || results[0].shape.size() != 1 || plan.axis != plan.rank - 1 ||
      results[0].shape[0] != plan.shape[plan.axis]) {
    problems->push_back(op.target + " does not run along the scanned dim");
    return "";
  }
  if (!is_float_dtype(results[0].dtype)) {
    problems->push_back(op.target + " makes " + results[0].dtype + " positions");
    return "";
  }
  const std::string at = position_expression(op, exact);
  if (at.empty()) problems->push_back(op.target + " with a start or step that is no number");
  return at;
}

/// How many ops read value, and whether the graph returns it.
int uses(const Graph& graph, int value) {
  int count = 0;
  for (const Op& op : graph.ops) count += std::count(op.inputs.begin(), op.inputs.end(), value);
  return count + static_cast<int>(std::count(graph.outputs.begin(), graph.outputs.end(), value));
}

/// Whether the flip op reverses only dim `axis` of a rank-`rank` tensor.
bool flips_only(const Op& op, int axis, int rank) {
  const json& dims = argument(op, 1, "dims");
  if (!dims.is_array() || dims.empty()) return false;
  for (const json& d : dims) {
    if (!d.is_number_integer() || (d.get<std::int64_t>() + rank) % rank != axis) return false;
  }
  return true;
}

}  // namespace

Status plan_scan(const Graph& graph, ScanPlan* plan) {
  ScanPlan p;
  std::vector<std::string> problems;
  int scan = -1;
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    if (graph.ops[k].name != "cumsum" && graph.ops[k].name != "cumprod") continue;
    if (scan >= 0) problems.push_back("it scans twice");
    scan = static_cast<int>(k);
  }
  if (scan < 0) {
    return Status::InvalidArgument("no scan plan: the graph has no cumulative sum or product");
  }
  if (graph.outputs.size() != 1) {
    problems.push_back("it returns " + n(graph.outputs.size()) + " values, not one");
  }
  const Op& op = graph.ops[scan];
  const auto& made = graph.values[op.value].results;
  const json& dim = argument(op, 1, "dim");
  const json& dtype = argument(op, 2, "dtype");
  if (op.inputs.empty() || made.size() != 1 || !is_float_dtype(made[0].dtype) ||
      made[0].shape.empty() || made[0].shape.size() > kRank || !dim.is_number_integer() ||
      !(dtype.is_null() || dtype == "torch." + made[0].dtype)) {
    problems.push_back(op.target + " is not a float scan of 1 to 6 dims along one dim");
  }
  if (!problems.empty()) {
    return Status::InvalidArgument("no scan plan:\n  " + join(problems, "\n  "));
  }
  p.shape = made[0].shape;
  p.product = op.name == "cumprod";
  p.rank = static_cast<int>(p.shape.size());
  p.axis = static_cast<int>((dim.get<std::int64_t>() + p.rank) % p.rank);
  std::int64_t inner = 1;
  for (int d = p.axis + 1; d < p.rank; ++d) inner *= p.shape[d];
  p.across = inner >= kAcrossFrom;

  // A reverse scan: the scan's operand a flip along its dim that only the scan reads, and its
  // result read only by a flip back. Ops before the first flip and after the second see each
  // element where it lies; the kernel walks each row from its end.
  int flip_in = -1, flip_out = -1;
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    const Op& other = graph.ops[k];
    if (other.name != "flip") continue;
    const bool in = other.value == op.inputs[0] && uses(graph, other.value) == 1;
    const bool out =
        !other.inputs.empty() && other.inputs[0] == op.value && uses(graph, op.value) == 1;
    if (!flips_only(other, p.axis, p.rank) || (!in && !out) || (in ? flip_in : flip_out) >= 0) {
      problems.push_back(other.target + " is not one of a flip and a flip back along the scan");
      continue;
    }
    (in ? flip_in : flip_out) = static_cast<int>(k);
  }
  if ((flip_in >= 0) != (flip_out >= 0)) {
    problems.push_back("it flips the scan's " + std::string(flip_in >= 0 ? "operand" : "result") +
                       " and not the other");
  }
  p.reverse = flip_in >= 0 && flip_out >= 0;
  ElementLines before(graph, {&p.inputs, &p.before, &p.ops, "b", false, "scan"}, &problems);
  ElementLines after(graph, {&p.inputs, &p.after, &p.ops, "a", true, "scan"}, &problems);
  const std::set<int> leading = ancestors(graph, op.inputs[0]);
  for (std::size_t k = 0; k < graph.ops.size() && problems.empty(); ++k) {
    const Op& other = graph.ops[k];
    if (static_cast<int>(k) == scan) {
      if (!before.operand(op.inputs[0], p.shape, &p.scanned)) break;
      after.define(op.value, "scanned", false);  // combined in another order than torch's
      p.ops.push_back(op.name);
    } else if (other.name == "flip") {
      // A flip is where the kernel walks from, not a pass of its own: its value is its operand's.
      ElementLines& side = static_cast<int>(k) < scan ? before : after;
      std::string variable;
      if (!problems.empty() || !side.operand(other.inputs[0], p.shape, &variable)) break;
      side.define(other.value, variable, side.exact(other.inputs[0]));
      p.ops.push_back(other.name);
    } else if (other.name == "arange") {
      bool exact = true;
      const std::string at = position(graph, other, p, &problems, &exact);
      before.define(other.value, at, exact);
      after.define(other.value, at, exact);
    } else if (static_cast<int>(k) < scan) {
      if (!leading.count(other.value)) {
        problems.push_back(other.target + " does not lead to the scan");
        continue;
      }
      before.add(other, p.shape);
    } else {
      after.add(other, p.shape);
    }
  }
  if (problems.empty()) {
    const int out = graph.outputs[0];
    const Value& result = graph.values[out];
    if (result.kind != "op" || result.results.size() != 1 || result.results[0].shape != p.shape ||
        (out != op.value && result.op < scan)) {
      problems.push_back("its output is not of the scanned shape, made after the scan");
    } else if (after.operand(out, p.shape, &p.result)) {
      p.output_dtype = result.results[0].dtype;
    }
  }
  // What the inputs broadcast to must be F: the kernel's sizes come from them.
  std::vector<std::int64_t> spanned(p.shape.size(), 1);
  for (const ElementInput& in : p.inputs) {
    const auto& shape = graph.values[in.value].results[0].shape;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      std::int64_t& size = spanned[spanned.size() - shape.size() + d];
      size = shape[d] != 1 ? shape[d] : size;
    }
  }
  if (problems.empty() && spanned != p.shape) {
    problems.push_back("its inputs do not span the scanned shape");
  }
  if (!problems.empty()) {
    return Status::InvalidArgument("no scan plan:\n  " + join(problems, "\n  "));
  }
  *plan = std::move(p);
  return Status::OK();
}

namespace {

/// The code that finds row r's first element in every input and the output: r's position in
/// each dim but the scanned one, last dim fastest.
std::string row_base(const ScanPlan& plan, int axis, const std::string& indent) {
  std::string s = indent + "Ix rest = r, ob = 0;\n";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) s += indent + "Ix b" + n(k) + " = 0;\n";
  for (int d = kRank - 1; d >= 0; --d) {
    if (d == axis) continue;
    s += indent + "{\n" + indent + "  const Ix i = rest % s" + n(d) + ";\n" + indent +
         "  rest /= s" + n(d) + ";\n" + indent + "  ob += i * os" + n(d) + ";\n";
    for (std::size_t k = 0; k < plan.inputs.size(); ++k)
      s += indent + "  b" + n(k) + " += i * in" + n(k) + "_t" + n(d) + ";\n";
    s += indent + "}\n";
  }
  return s;
}

/// The loads of one side's inputs at element k of the row.
std::string loads(const ScanPlan& plan, bool after, int axis, const std::string& indent) {
  std::string s;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].after != after) continue;
    s += indent + "const float in" + n(k) + " = sa_load(in" + n(k) + "_data[b" + n(k) +
         " + k * in" + n(k) + "_t" + n(axis) + "]);\n";
  }
  return s;
}

std::string lines(const std::vector<std::string>& body, const std::string& indent) {
  std::string s;
  for (const std::string& line : body) s += indent + line + "\n";
  return s;
}

/// The output's contiguous strides, os0..os5, from the sizes.
std::string out_strides(const std::string& indent) {
  std::string s = indent + "const Ix os5 = 1;\n";
  for (int d = kRank - 2; d >= 0; --d)
    s += indent + "const Ix os" + n(d) + " = os" + n(d + 1) + " * s" + n(d + 1) + ";\n";
  return s;
}

/// A CUDA launch configuration: threads a block, and elements of a row a thread scans at a time.
struct Launch {
  int threads;
  int items;
};
// The first is the default (-1); the rest are configurations 0, 1, ...
const std::vector<Launch> kRowLaunches = {{256, 8},  {128, 8}, {128, 16},
                                          {256, 16}, {512, 8}, {1024, 4}};
const std::vector<Launch> kAcrossLaunches = {{256, 8}, {128, 8},  {256, 4},
                                             {512, 4}, {128, 16}, {1024, 4}};

std::string launch_tables(const std::vector<Launch>& launches) {
  std::string threads, items;
  for (const Launch& l : launches) {
    threads += std::string(threads.empty() ? "" : ", ") + n(l.threads);
    items += std::string(items.empty() ? "" : ", ") + n(l.items);
  }
  return "static const int sa_threads[] = {" + threads + "};\n" +
         "static const int sa_items[] = {" + items + "};\n";
}

/// The CUDA kernel that gives a block a row (ScanPlan's note).
std::string row_kernel(const ScanPlan& plan, int axis, const std::string& kernel_params,
                       const std::string& store) {
  const std::string a = n(axis);
  return "\n// A block a row, in tiles of blockDim.x x V elements, a warp 32 x V neighbours of a\n"
         "// tile. A warp reads its part striped (element q * 32 + lane of it at step q: each\n"
         "// step one coalesced read) into shared memory, and each thread takes V neighbours from\n"
         "// there and scans them; then the warp's threads' totals are scanned by shuffles, the\n"
         "// block's warps' through warp_sums, and the carry takes each tile's total to the\n"
         "// next. The scanned values go back through shared memory and out striped. A warp's\n"
         "// part is padded by a float every 32, which keeps both readings free of bank\n"
         "// conflicts. blockDim.x is a multiple of 32.\n"
         "SA_FN int sa_padded(int p) { return p + (p >> 5); }\n\n"
         "template <class Ix, int V>\n"
         "static __global__ void __launch_bounds__(1024) fused_scan_kernel(" +
         kernel_params +
         ") {\n"
         "  __shared__ float warp_sums[32];\n"
         "  extern __shared__ float sa_tiles[];\n"
         "  const Ix R = s" +
         a + ", rows = s0 * s1 * s2 * s3 * s4 * s5 / R;\n" + out_strides("  ") +
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
         "  const int warps = blockDim.x >> 5;\n"
         "  float* part = sa_tiles + warp * 33 * V;  // the warp's 32 x V, padded\n"
         "  for (Ix r = blockIdx.x; r < rows; r += gridDim.x) {\n" +
         row_base(plan, axis, "    ") +
         "    float carry = SA_IDENTITY;\n"
         "    for (Ix start = 0; start < R; start += (Ix)blockDim.x * V) {\n"
         "      const Ix first = start + (Ix)warp * 32 * V;  // the warp's part's first element\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) {\n"
         "        const Ix kl = first + q * 32 + lane;\n"
         "        float value = SA_IDENTITY;\n"
         "        if (kl < R) {\n"
         "          const Ix k = SA_AT(kl);\n" +
         loads(plan, false, axis, "          ") + lines(plan.before, "          ") +
         "          value = " + plan.scanned +
         ";\n"
         "        }\n"
         "        part[sa_padded(q * 32 + lane)] = value;\n"
         "      }\n"
         "      __syncwarp();\n"
         "      float v[V];\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) v[q] = part[sa_padded(lane * V + q)];\n"
         "#pragma unroll\n"
         "      for (int q = 1; q < V; ++q) v[q] = sa_combine(v[q - 1], v[q]);\n"
         "      float x = v[V - 1];  // the thread's total, then the warp's up to it\n"
         "#pragma unroll\n"
         "      for (int d = 1; d < 32; d <<= 1) {\n"
         "        const float y = __shfl_up_sync(0xffffffffu, x, d);\n"
         "        if (lane >= d) x = sa_combine(y, x);\n"
         "      }\n"
         "      float exclusive = __shfl_up_sync(0xffffffffu, x, 1);\n"
         "      if (lane == 0) exclusive = SA_IDENTITY;\n"
         "      if (lane == 31) warp_sums[warp] = x;\n"
         "      __syncthreads();\n"
         "      if (warp == 0) {\n"
         "        float w = lane < warps ? warp_sums[lane] : SA_IDENTITY;\n"
         "#pragma unroll\n"
         "        for (int d = 1; d < 32; d <<= 1) {\n"
         "          const float y = __shfl_up_sync(0xffffffffu, w, d);\n"
         "          if (lane >= d) w = sa_combine(y, w);\n"
         "        }\n"
         "        if (lane < warps) warp_sums[lane] = w;\n"
         "      }\n"
         "      __syncthreads();\n"
         "      const float prefix = sa_combine(\n"
         "          sa_combine(carry, warp > 0 ? warp_sums[warp - 1] : SA_IDENTITY), exclusive);\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) part[sa_padded(lane * V + q)] = sa_combine(prefix, "
         "v[q]);\n"
         "      __syncwarp();\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) {\n"
         "        const Ix kl = first + q * 32 + lane;\n"
         "        if (kl >= R) break;\n"
         "        const Ix k = SA_AT(kl);\n"
         "        const float scanned = part[sa_padded(q * 32 + lane)];\n" +
         loads(plan, true, axis, "        ") + lines(plan.after, "        ") + "        " + store +
         "      }\n"
         "      carry = sa_combine(carry, warp_sums[warps - 1]);\n"
         "      __syncthreads();  // warp_sums and the parts are the next tile's\n"
         "    }\n"
         "  }\n}\n\n";
}

/// The CUDA kernel that gives a block 32 neighbouring rows, a lane each (ScanPlan's note).
std::string across_kernel(const ScanPlan& plan, int axis, const std::string& kernel_params,
                          const std::string& store) {
  return "\n// A block 32 neighbouring rows, a lane each, in tiles of V x warps elements of each\n"
         "// row: warp w takes elements w * V .. w * V + V - 1 of the tile, so that at each step\n"
         "// the warp reads one element of each of its 32 rows (neighbours in memory where the\n"
         "// scanned dim is not the last). Each lane scans its V values; the warps' totals go\n"
         "// through totals[warp][lane], each lane adds up those of the warps before its own, and\n"
         "// the carry takes each tile's total to the next.\n"
         "template <class Ix, int V>\n"
         "static __global__ void __launch_bounds__(1024) fused_scan_kernel(" +
         kernel_params +
         ") {\n"
         "  __shared__ float totals[32][32];\n"
         "  const Ix R = s" +
         n(axis) + ", rows = s0 * s1 * s2 * s3 * s4 * s5 / R;\n" + out_strides("  ") +
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
         "  const int warps = blockDim.x >> 5;\n"
         "  for (Ix group = (Ix)blockIdx.x * 32; group < rows; group += (Ix)gridDim.x * 32) {\n"
         "    const Ix r = group + lane;\n"
         "    const bool live = r < rows;\n" +
         row_base(plan, axis, "    ") +
         "    float carry = SA_IDENTITY;\n"
         "    for (Ix start = 0; start < R; start += (Ix)warps * V) {\n"
         "      const Ix first = start + (Ix)warp * V;  // the warp's first element of the tile\n"
         "      float v[V];\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) {\n"
         "        const Ix kl = first + q;\n"
         "        v[q] = SA_IDENTITY;\n"
         "        if (live && kl < R) {\n"
         "          const Ix k = SA_AT(kl);\n" +
         loads(plan, false, axis, "          ") + lines(plan.before, "          ") +
         "          v[q] = " + plan.scanned +
         ";\n"
         "        }\n"
         "      }\n"
         "#pragma unroll\n"
         "      for (int q = 1; q < V; ++q) v[q] = sa_combine(v[q - 1], v[q]);\n"
         "      totals[warp][lane] = v[V - 1];\n"
         "      __syncthreads();\n"
         "      float prefix = carry;\n"
         "      for (int w = 0; w < warps; ++w) {\n"
         "        if (w == warp) prefix = carry;\n"
         "        carry = sa_combine(carry, totals[w][lane]);\n"
         "      }\n"
         "#pragma unroll\n"
         "      for (int q = 0; q < V; ++q) {\n"
         "        const Ix kl = first + q;\n"
         "        if (!live || kl >= R) break;\n"
         "        const Ix k = SA_AT(kl);\n"
         "        const float scanned = sa_combine(prefix, v[q]);\n" +
         loads(plan, true, axis, "        ") + lines(plan.after, "        ") + "        " + store +
         "      }\n"
         "      __syncthreads();  // totals are the next tile's\n"
         "    }\n"
         "  }\n}\n\n";
}

}  // namespace

std::string scan_kernel_source(const ScanPlan& plan, const std::string& device) {
  const bool cuda = device == "cuda";
  const int axis = kRank - plan.rank + plan.axis;
  const std::string a = n(axis);
  std::string params, args, reach;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    params +=
        "const " + element_type(plan.inputs[k].dtype) + "* __restrict__ in" + n(k) + "_data, ";
    args += "in" + n(k) + "_data, ";
  }
  params += element_type(plan.output_dtype) + "* __restrict__ out";
  args += "out";
  for (int d = 0; d < kRank; ++d) {
    params += ", int64_t s" + n(d);
    args += ", s" + n(d);
  }
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    std::string far;
    for (int d = 0; d < kRank; ++d) {
      const std::string t = "in" + n(k) + "_t" + n(d);
      params += ", int64_t " + t;
      args += ", " + t;
      far += std::string(d ? " + " : "") + "(s" + n(d) + " - 1) * " + t;
    }
    reach += "  if (" + far + " > reach) reach = " + far + ";\n";
  }
  const std::string store =
      "sa_store(out + ob + k * os" + a + ", " + rounded(plan.result, plan.output_dtype) + ");\n";
  std::string source = "// Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                       " in one kernel, a row's running value carried along it.\n"
                       "#include <math.h>\n#include <stdint.h>\n";
  // The scan's operation and its identity: what the running value starts from, and what fills
  // a tile past a row's end.
  const std::string helpers =
      dtype_helpers(device) + kExpressionHelpers +
      (plan.product ? "SA_FN float sa_combine(float a, float b) { return a * b; }\n"
                      "#define SA_IDENTITY 1.0f\n"
                    : "SA_FN float sa_combine(float a, float b) { return a + b; }\n"
                      "#define SA_IDENTITY 0.0f\n") +
      // Where the kl-th element of a row's scan lies along it.
      (plan.reverse ? "#define SA_AT(kl) (R - 1 - (kl))  // a reverse scan: from the row's end\n"
                    : "#define SA_AT(kl) (kl)\n");
  if (!cuda) {
    return source + "#include <omp.h>\n\n#define SA_FN static inline\n" + helpers +
           cpu_config_source("fused_scan") + "typedef int64_t Ix;\n\n" +
           "extern \"C\" int fused_scan(" + params +
           ", void* stream) {\n"
           "  (void)stream;\n"
           "  sa_apply_config();\n"
           "  const Ix R = s" +
           a + ", total = s0 * s1 * s2 * s3 * s4 * s5;\n  if (total == 0) return 0;\n" +
           out_strides("  ") +
           "#pragma omp parallel for schedule(runtime)\n"
           "  for (Ix r = 0; r < total / R; ++r) {\n" +
           row_base(plan, axis, "    ") +
           "    float carry = SA_IDENTITY;\n"
           "    for (Ix kl = 0; kl < R; ++kl) {\n"
           "      const Ix k = SA_AT(kl);\n" +
           loads(plan, false, axis, "      ") + lines(plan.before, "      ") +
           "      carry = sa_combine(carry, " + plan.scanned +
           ");\n      const float scanned = carry;\n" + loads(plan, true, axis, "      ") +
           lines(plan.after, "      ") + "      " + store + "    }\n  }\n  return 0;\n}\n";
  }
  const std::vector<Launch>& launches = plan.across ? kAcrossLaunches : kRowLaunches;
  std::string kernel_params = params;
  for (std::size_t at = 0; (at = kernel_params.find("int64_t ", at)) != std::string::npos;)
    kernel_params.replace(at, 8, "Ix ");
  return source + "#include <cuda_runtime.h>\n\n#define SA_FN static __device__ __forceinline__\n" +
         helpers + kCudaGridHelper +
         (plan.across ? across_kernel(plan, axis, kernel_params, store)
                      : row_kernel(plan, axis, kernel_params, store)) +
         "// The launch configurations model_new.py may choose: threads a block and elements a\n"
         "// thread" +
         (plan.across ? " of each row" : "") + "; -1: the first.\n" + launch_tables(launches) +
         "static int sa_config = -1;\n"
         "extern \"C\" int fused_scan_config(int64_t config) {\n"
         "  sa_config = config >= 0 && config < " +
         n(launches.size() - 1) +
         " ? (int)config : -1;\n"
         "  return 0;\n}\n\n"
         "template <class Ix, int V>\n"
         "static int sa_launch(" +
         params + ", int threads, unsigned grid, cudaStream_t s) {\n" +
         std::string(
             plan.across
                 ? "  const size_t bytes = 0;\n"
                 : "  const size_t bytes = (size_t)(threads / 32) * 33 * V * sizeof(float);\n") +
         "  fused_scan_kernel<Ix, V><<<grid, threads, bytes, s>>>(" + args +
         ");\n"
         "  return (int)cudaGetLastError();\n}\n\n"
         "template <class Ix>\n"
         "static int sa_launch_items(" +
         params +
         ", int threads, int items, unsigned grid, cudaStream_t s) {\n"
         "  if (items == 16) return sa_launch<Ix, 16>(" +
         args +
         ", threads, grid, s);\n"
         "  if (items == 8) return sa_launch<Ix, 8>(" +
         args +
         ", threads, grid, s);\n"
         "  return sa_launch<Ix, 4>(" +
         args +
         ", threads, grid, s);\n}\n\n"
         "extern \"C\" int fused_scan(" +
         params +
         ", void* stream) {\n"
         "  const int64_t total = s0 * s1 * s2 * s3 * s4 * s5;\n"
         "  if (total == 0) return 0;\n"
         "  const int threads = sa_threads[sa_config + 1], items = sa_items[sa_config + 1];\n"
         "  const int64_t rows = total / s" +
         a + ";\n" +
         (plan.across ? "  const unsigned grid = sa_grid((rows + 31) / 32);  // 32 rows a block\n"
                      : "  const unsigned grid = sa_grid(rows);\n") +
         "  // 32-bit indices where every element and offset fits, with room for a tile's\n"
         "  // overshoot past a row's end and the grid's stride (32 rows a block at most).\n"
         "  int64_t reach = total;\n" +
         reach +
         "  cudaStream_t s = (cudaStream_t)stream;\n"
         "  if (reach < INT32_MAX - (int64_t)items * threads - 32 * ((int64_t)grid + 1))\n"
         "    return sa_launch_items<int32_t>(" +
         args +
         ", threads, items, grid, s);\n"
         "  return sa_launch_items<int64_t>(" +
         args + ", threads, items, grid, s);\n}\n";
}

std::string scan_model_source(const Graph& graph, const ScanPlan& plan) {
  std::string s = "\"\"\"Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                  " in one kernel (kernels/).\"\"\"\n\n"
                  "import torch\nimport torch.nn as nn\n\nfrom utils.kernels import load\n\n"
                  "RANK = 6\n"
                  "lib = load()\n"
                  "fused_scan = lib.bind(\"fused_scan\", " +
                  std::string("*[\"tensor\"] * ") + n(plan.inputs.size() + 1) +
                  ", *[\"i64\"] * (RANK * " + n(plan.inputs.size() + 1) + "), \"stream\")\n" +
                  model_config_source("fused_scan") +
                  "\n\n"
                  "def steps_of(own, stride):\n"
                  "    \"\"\"The strides of a tensor of shape own and strides stride against the "
                  "scanned\n"
                  "    shape padded to RANK dims, which it broadcasts to: 0 along a dim it does "
                  "not have or\n"
                  "    has once.\"\"\"\n"
                  "    offset = RANK - len(own)\n"
                  "    return [0 if k < offset or own[k - offset] == 1 else stride[k - offset]\n"
                  "            for k in range(RANK)]\n\n\n"
                  "def launch_sizes(shapes, strides):\n"
                  "    \"\"\"out's shape and the kernel's sizes after it (the scanned shape "
                  "padded to RANK\n"
                  "    dims, then each input's strides) for inputs of these shapes and "
                  "strides.\"\"\"\n"
                  "    # The scanned shape: what the inputs broadcast to.\n"
                  "    shape = [1] * " +
                  n(plan.rank) +
                  "\n"
                  "    for own in shapes:\n"
                  "        for k, size in enumerate(own):\n"
                  "            at = len(shape) - len(own) + k\n"
                  "            shape[at] = size if size != 1 else shape[at]\n"
                  "    sizes = [1] * (RANK - len(shape)) + shape\n"
                  "    for own, stride in zip(shapes, strides):\n"
                  "        sizes += steps_of(own, stride)\n"
                  "    return shape, sizes\n\n\n";
  s += model_class_head(graph, values_of(plan.inputs), kLayoutMemoInit) +
       layout_memo_lines("shape, sizes", "launch_sizes") +
       "        out = torch.empty(shape, dtype=torch." + plan.output_dtype +
       ", device=inputs[0].device)\n"
       "        fused_scan(*inputs, out, *sizes)\n"
       "        return out" +
       graph.output_view + "\n";
  return s;
}

Status synthesize_scan(const Graph& graph, const std::string& device, Candidate* candidate) {
  ScanPlan plan;
  if (Status s = plan_scan(graph, &plan); !s.ok()) return s;
  const std::string kernel = scan_kernel_source(plan, device);
  candidate->files["model_new.py"] = scan_model_source(graph, plan);
  candidate->files[device == "cuda" ? "kernels/fused_scan.cu" : "kernels/fused_scan.cpp"] = kernel;
  if (device == "cuda") {
    const std::vector<Launch>& launches = plan.across ? kAcrossLaunches : kRowLaunches;
    for (std::size_t k = 0; k < launches.size(); ++k) {
      const Launch& l = launches[k];
      candidate->configs.push_back(
          {static_cast<int>(k) - 1,
           plan.across ? "32 rows x " + n(l.threads / 32) + " warps x " + n(l.items) + " a row"
                       : n(l.threads) + " threads x " + n(l.items) + " a row"});
    }
  } else {
    candidate->configs = cpu_schedules();
  }
  candidate->pattern = sha256_hex(kernel);
  long long total = 1;
  for (std::int64_t size : plan.shape) total *= size;
  candidate->shape_class = size_class(total) + " elements";
  return Status::OK();
}

}  // namespace cuda_agent::synth
