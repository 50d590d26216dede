#include "synth/pool_plan.h"

#include <algorithm>
#include <regex>
#include <set>

#include "synth/element_lines.h"
#include "synth/expression.h"
#include "synth/model_source.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

std::string n(std::size_t k) { return std::to_string(k); }

/// The kind of pooling of an op's base name, and its number of spatial dims; "" for none.
std::pair<std::string, int> pooling_of(const std::string& name) {
  for (const char* kind : {"adaptive_avg", "max", "avg"}) {
    const std::string prefix = std::string(kind) + "_pool";
    if (name.size() == prefix.size() + 2 && name.compare(0, prefix.size(), prefix) == 0 &&
        name.back() == 'd' && name[prefix.size()] >= '1' && name[prefix.size()] <= '3') {
      return {kind, name[prefix.size()] - '0'};
    }
  }
  return {"", 0};
}

/// The kind of window op `op` is, and its number of spatial dims: a pooling, or a depthwise
/// convolution (a filter of its own for each channel: groups = channels, weight (C, 1, ...)) of
/// a weight the task holds; "" for neither.
std::pair<std::string, int> window_kind(const Graph& graph, const Op& op) {
  auto pooling = pooling_of(op.name);
  if (!pooling.first.empty()) return pooling;
  static const std::set<std::string> convolutions = {"conv1d", "conv2d", "conv3d"};
  if (!convolutions.count(op.name) || op.inputs.size() < 2) return {"", 0};
  const auto& x = graph.values[op.inputs[0]].results;
  const Value& w = graph.values[op.inputs[1]];
  const json& groups = argument(op, 6, "groups");
  if (x.size() != 1 || w.results.size() != 1 || w.kind == "op" || !groups.is_number_integer()) {
    return {"", 0};
  }
  const auto& ws = w.results[0].shape;
  const int spatial = static_cast<int>(ws.size()) - 2;
  const auto& xs = x[0].shape;
  if (spatial < 1 || spatial > 3 || ws[1] != 1 || xs.size() < ws.size() - 1 ||
      groups.get<std::int64_t>() != ws[0] || xs[xs.size() - spatial - 1] != ws[0]) {
    return {"", 0};
  }
  return {"depthwise", spatial};
}

/// The op's window argument at index: spatial sizes, from a list of that many or of one (for
/// every dim), or a bare int; `fallback` where it is absent, an empty list where it may be
/// (stride: the kernel's). Empty where it is something else.
std::vector<std::int64_t> window_argument(const Op& op, std::size_t index, const char* name,
                                          int spatial, std::vector<std::int64_t> fallback) {
  const json& a = argument(op, index, name);
  std::vector<std::int64_t> sizes;
  if (a.is_null() || (a.is_array() && a.empty())) return fallback;
  if (a.is_number_integer()) return std::vector<std::int64_t>(spatial, a.get<std::int64_t>());
  if (!a.is_array()) return {};
  for (const json& v : a) {
    if (!v.is_number_integer()) return {};
    sizes.push_back(v.get<std::int64_t>());
  }
  if (sizes.size() == 1) sizes.assign(spatial, sizes[0]);
  if (static_cast<int>(sizes.size()) != spatial) return {};
  return sizes;
}

/// The sizes of (D, H, W) from a spatial list: 1 (or `missing`) before it.
std::vector<std::int64_t> in_dhw(const std::vector<std::int64_t>& sizes, std::int64_t missing) {
  std::vector<std::int64_t> out(3 - sizes.size(), missing);
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

/// Reads the window op's window (a pooling's, or a depthwise convolution's filters) into plan;
/// a problem for anything else.
bool read_window(const Graph& graph, const Op& op, int rank, PoolPlan* plan,
                 std::vector<std::string>* problems) {
  const int s = plan->spatial;
  if (rank != s + 1 && rank != s + 2) {
    problems->push_back(op.target + " of a rank-" + n(rank) + " tensor");
    return false;
  }
  plan->leading = rank - s;
  if (plan->kind == "adaptive_avg") {
    const std::vector<std::int64_t> size = window_argument(op, 1, "output_size", s, {});
    if (size.empty() || *std::min_element(size.begin(), size.end()) < 1) {
      problems->push_back(op.target + " without an output size of positive ints");
      return false;
    }
    plan->output_size = in_dhw(size, 1);
    return true;
  }
  // A depthwise convolution's window is its weight's, its arguments one further along.
  const bool depthwise = plan->kind == "depthwise";
  const std::size_t at = depthwise ? 2 : 1;
  std::vector<std::int64_t> kernel = window_argument(op, 1, "kernel_size", s, {});
  if (depthwise) {
    const auto& w = graph.values[op.inputs[1]].results[0].shape;
    kernel.assign(w.end() - s, w.end());
  }
  const std::vector<std::int64_t> stride = window_argument(
      op, at + 1, "stride", s, depthwise ? std::vector<std::int64_t>(s, 1) : kernel);
  const std::vector<std::int64_t> padding =
      window_argument(op, at + 2, "padding", s, std::vector<std::int64_t>(s, 0));
  std::vector<std::int64_t> dilation(s, 1);
  std::size_t flags = 4;  // the index of ceil_mode; avg's count_include_pad and divisor follow
  if (plan->kind == "max" || depthwise) {
    dilation = window_argument(op, at + 3, "dilation", s, dilation);
    flags = 5;
  }
  if (kernel.empty() || stride.empty() || padding.empty() || dilation.empty()) {
    problems->push_back(op.target + " with a window that is not lists of ints");
    return false;
  }
  for (int d = 0; d < s; ++d) {
    if (kernel[d] < 1 || stride[d] < 1 || dilation[d] < 1 || padding[d] < 0 ||
        (!depthwise && 2 * padding[d] > kernel[d])) {
      problems->push_back(op.target + " with a window torch refuses");
      return false;
    }
  }
  plan->kernel = in_dhw(kernel, 1);
  plan->stride = in_dhw(stride, 1);
  plan->padding = in_dhw(padding, 0);
  plan->dilation = in_dhw(dilation, 1);
  if (depthwise) {
    plan->weight = op.inputs[1];
    plan->weight_dtype = graph.values[plan->weight].results[0].dtype;
    const json& bias = argument(op, 2, "bias");
    plan->bias = bias.is_object() && bias.contains("ref") ? graph.find(bias["ref"]) : -1;
    if (plan->bias >= 0 &&
        (graph.values[plan->bias].kind == "op" || graph.values[plan->bias].results.size() != 1 ||
         graph.values[plan->bias].results[0].shape.size() != 1)) {
      problems->push_back(op.target + " with a bias that is not a vector the task holds");
      return false;
    }
    return true;
  }
  const json& ceil_mode = argument(op, flags, "ceil_mode");
  if (!ceil_mode.is_null() && !ceil_mode.is_boolean()) {
    problems->push_back(op.target + " with a ceil_mode that is not a bool");
    return false;
  }
  plan->ceil_mode = ceil_mode.is_boolean() && ceil_mode.get<bool>();
  if (plan->kind == "avg") {
    const json& include = argument(op, flags + 1, "count_include_pad");
    const json& divisor = argument(op, flags + 2, "divisor_override");
    if ((!include.is_null() && !include.is_boolean()) ||
        (!divisor.is_null() && !(divisor.is_number_integer() && divisor.get<std::int64_t>() > 0))) {
      problems->push_back(op.target + " with a count_include_pad or divisor it cannot take");
      return false;
    }
    plan->count_include_pad = !include.is_boolean() || include.get<bool>();
    plan->divisor = divisor.is_null() ? 0 : divisor.get<std::int64_t>();
  }
  return true;
}

}  // namespace

bool is_depthwise_convolution(const Graph& graph, const Op& op) {
  return window_kind(graph, op).first == "depthwise";
}

Status plan_pool(const Graph& graph, PoolPlan* plan) {
  PoolPlan p;
  std::vector<std::string> problems;
  int pool = -1;  // the pooling op's index
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    if (window_kind(graph, graph.ops[k]).first.empty()) continue;
    if (pool >= 0) {
      problems.push_back("it pools twice (" + graph.ops[pool].target + ", " + graph.ops[k].target +
                         ")");
    }
    pool = static_cast<int>(k);
  }
  if (pool < 0) return Status::InvalidArgument("no pooling plan: the graph pools nothing");
  if (graph.outputs.size() != 1) {
    problems.push_back("it returns " + n(graph.outputs.size()) + " values, not one");
  }
  const Op& op = graph.ops[pool];
  std::tie(p.kind, p.spatial) = window_kind(graph, op);
  const Value& source = graph.values[op.inputs.empty() ? 0 : op.inputs[0]];
  const Value& pooled = graph.values[op.value];
  if (op.inputs.empty() || source.results.size() != 1 || pooled.results.size() != 1 ||
      !is_float_dtype(pooled.results[0].dtype)) {
    problems.push_back(op.target + " does not pool one float tensor into one");
  }
  if (!problems.empty()) {
    return Status::InvalidArgument("no pooling plan:\n  " + join(problems, "\n  "));
  }
  const std::vector<std::int64_t>& in_shape = source.results[0].shape;
  p.output_shape = pooled.results[0].shape;
  p.pool_dtype = pooled.results[0].dtype;
  read_window(graph, op, static_cast<int>(in_shape.size()), &p, &problems);

  // Ops before the pooling make its operand; every op after it reads what the pooling makes.
  const std::set<int> before = ancestors(graph, op.inputs[0]);
  ElementLines in_side(graph, {&p.inputs, &p.before, &p.ops, "b", false, "pooling"}, &problems);
  ElementLines out_side(graph, {&p.inputs, &p.after, &p.ops, "a", true, "pooling"}, &problems);
  for (std::size_t k = 0; k < graph.ops.size() && problems.empty(); ++k) {
    const Op& other = graph.ops[k];
    if (static_cast<int>(k) == pool) {
      if (!in_side.operand(op.inputs[0], in_shape, &p.pooled)) break;
      p.pooled_exact = in_side.exact(op.inputs[0]);
      // A maximum of exact values is one of them; an average is summed in another order.
      const bool exact = p.kind == "max" && p.pooled_exact;
      out_side.define(op.value, exact ? rounded("pooled", p.pool_dtype) : "pooled", exact);
    } else if (static_cast<int>(k) < pool) {
      if (!before.count(other.value)) {
        problems.push_back(other.target + " does not lead to the pooling");
        continue;
      }
      in_side.add(other, in_shape);
    } else {
      out_side.add(other, p.output_shape);
    }
  }
  if (problems.empty()) {
    const int out = graph.outputs[0];
    const Value& result = graph.values[out];
    if (result.kind != "op" || result.results.size() != 1 ||
        result.results[0].shape != p.output_shape || (out != op.value && result.op < pool)) {
      problems.push_back("its output is not the pooled shape, made after the pooling");
    } else {
      std::string variable;
      out_side.operand(out, p.output_shape, &variable);
      p.result = variable;
      p.output_dtype = result.results[0].dtype;
    }
  }
  if (!problems.empty()) {
    return Status::InvalidArgument("no pooling plan:\n  " + join(problems, "\n  "));
  }
  p.ops.insert(p.ops.begin() + static_cast<std::ptrdiff_t>(p.before.size()), op.name);
  for (const ElementInput& in : p.inputs) {
    // Its dims lined up from the right with its side's, the last `spatial` of which are D, H, W.
    const std::vector<std::int64_t>& shape = graph.values[in.value].results[0].shape;
    const std::size_t side = (in.after ? p.output_shape : in_shape).size();
    bool constant = true;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const std::size_t at = side - shape.size() + d;  // its dim's position on the side
      constant = constant && (at + p.spatial < side || shape[d] == 1);
    }
    p.constant_in_space.push_back(constant);
  }
  *plan = std::move(p);
  return Status::OK();
}

namespace {

/// The input's element at position (n, c, d, h, w) of its side.
std::string offset(std::size_t k, const char* d, const char* h, const char* w) {
  const std::string in = "in" + n(k);
  return "n * " + in + "_sn + c * " + in + "_sc + " + d + " * " + in + "_sd + " + h + " * " + in +
         "_sh + " + w + " * " + in + "_sw";
}

/// One side's loads and lines, split by where they run: `once` those that depend only on
/// inputs the same along every spatial dim (read at the thread's n and c), worked out once a
/// thread; `each` the rest, at every element (before the pooling) or output (after it); each
/// part at its indent.
struct SideCode {
  std::string once, each;
};

SideCode side_code(const PoolPlan& plan, bool after, const std::string& once_indent,
                   const std::string& each_indent) {
  static const std::regex kName(R"(\b[a-z_][a-z_0-9]*\b)");
  static const std::regex kOwn(R"(in[0-9]+|[ab][0-9]+)");
  static const std::set<std::string> kPosition = {"d", "h", "w",      "od",  "oh", "ow",
                                                  "q", "j", "pooled", "acc", "sum"};
  std::set<std::string> constant;  // variables worked out once
  SideCode code;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].after != after) continue;
    const bool once = k < plan.constant_in_space.size() && plan.constant_in_space[k];
    const std::string in = "in" + n(k);
    const std::string at = once    ? "n * " + in + "_sn + c * " + in + "_sc"
                           : after ? offset(k, "od", "oh", "ow")
                                   : offset(k, "d", "h", "w");
    (once ? code.once : code.each) += (once ? once_indent : each_indent) + "const float " + in +
                                      " = sa_load(" + in + "_data[" + at + "]);\n";
    if (once) constant.insert(in);
  }
  for (const std::string& line : after ? plan.after : plan.before) {
    // "const float bK = <expression>;": once where every variable the expression names is.
    const std::size_t eq = line.find(" = ");
    const std::string head = line.substr(0, eq), expression = line.substr(eq + 3);
    const std::string name = head.substr(head.rfind(' ') + 1);
    bool once = true;
    for (auto it = std::sregex_iterator(expression.begin(), expression.end(), kName);
         once && it != std::sregex_iterator(); ++it) {
      const std::string word = it->str();
      if (kPosition.count(word)) once = false;
      if (std::regex_match(word, kOwn) && !constant.count(word)) once = false;
    }
    if (once) constant.insert(name);
    (once ? code.once : code.each) += (once ? once_indent : each_indent) + line + "\n";
  }
  return code;
}

/// The code after a pooled value is known, for output ow: the ops after the pooling less those
/// worked out once a thread (after, indented by six), the store.
std::string epilogue(const PoolPlan& plan, const std::string& after) {
  return after + "      sa_store(out + row * OW + ow, " + rounded(plan.result, plan.output_dtype) +
         ");\n";
}

/// An adaptive average's outputs, one at a time: each walks its own window, whose bounds
/// depend on the output.
std::string adaptive_body(const PoolPlan& plan, const std::string& element,
                          const std::string& after) {
  const char* dims[3] = {"d", "h", "w"};
  const char* outs[3] = {"od", "oh", "ow"};
  const char* sizes[3] = {"ID", "IH", "IW"};
  const char* out_sizes[3] = {"OD", "OH", "OW"};
  std::string s =
      "#pragma unroll\n"
      "    for (int j = 0; j < OPT; ++j) {\n"
      "      const Ix ow = ow0 + j;\n"
      "      if (ow >= OW) break;\n"
      "      float sum = 0.0f;\n";
  std::string loops, close;
  for (int d = 0; d < 3; ++d) {
    const std::string x = dims[d];
    // torch's adaptive windows: [floor(o * I / O), ceil((o + 1) * I / O)).
    s += "      const Ix " + x + "0 = (" + outs[d] + " * " + sizes[d] + ") / " + out_sizes[d] +
         ", " + x + "1 = ((" + outs[d] + " + 1) * " + sizes[d] + " + " + out_sizes[d] + " - 1) / " +
         out_sizes[d] + ";\n";
    loops += std::string(6 + 2 * d, ' ') + "for (Ix " + x + " = " + x + "0; " + x + " < " + x +
             "1; ++" + x + ") {\n";
    close = std::string(6 + 2 * d, ' ') + "}\n" + close;
  }
  s += loops + element + "          sum += " + plan.pooled + ";\n" + close;
  s += "      const float pooled = sum / (float)((d1 - d0) * (h1 - h0) * (w1 - w0));\n";
  return s + epilogue(plan, after) + "    }\n";
}

/// A fixed window's OPT outputs together. Along D and H they share their window; along W the
/// thread walks the span their windows cover, reading each element once, and adds it to the
/// outputs whose windows hold it (which the compiler works out: every bound but the sizes is
/// a constant). Each output's elements are taken in the order its own window walk would.
std::string fixed_body(const PoolPlan& plan, const std::string& element, const std::string& after) {
  const auto c = [](std::int64_t v) { return std::to_string(v); };
  const char* dims[3] = {"d", "h", "w"};
  const char* outs[3] = {"od", "oh", "ow"};
  const char* sizes[3] = {"ID", "IH", "IW"};
  const bool max = plan.kind == "max";
  std::string s = "    float acc[OPT];  // each output's " + std::string(max ? "maximum" : "sum") +
                  " so far\n"
                  "#pragma unroll\n"
                  "    for (int j = 0; j < OPT; ++j) acc[j] = " +
                  (max ? "-INFINITY" : "0.0f") + ";\n";
  std::string loops, close;
  for (int d = 0; d < 2; ++d) {  // D and H; W is the span's
    const std::string x = dims[d];
    s += "    const Ix " + x + "_start = " + outs[d] + " * " + c(plan.stride[d]) + " - " +
         c(plan.padding[d]) + ";\n";
    loops += std::string(4 + 2 * d, ' ') + "for (Ix k" + x + " = 0; k" + x + " < " +
             c(plan.kernel[d]) + "; ++k" + x + ") {\n" + std::string(6 + 2 * d, ' ') + "const Ix " +
             x + " = " + x + "_start + k" + x + " * " + c(plan.dilation[d]) + ";\n" +
             std::string(6 + 2 * d, ' ') + "if (" + x + " < 0 || " + x + " >= " + sizes[d] +
             ") continue;\n";
    close = std::string(4 + 2 * d, ' ') + "}\n" + close;
  }
  const std::string stride = c(plan.stride[2]), dilation = c(plan.dilation[2]);
  s += "    const Ix w_first = ow0 * " + stride + " - " + c(plan.padding[2]) + ";\n";
  std::string take;  // output j's use of element (kd, kh, kw), whose value is plan.pooled
  if (max) {
    // torch's rule: a larger value or a NaN replaces the maximum, so a NaN in the window stays.
    take = "if (" + plan.pooled + " > acc[j] || " + plan.pooled + " != " + plan.pooled +
           ") acc[j] = " + plan.pooled + ";";
  } else if (plan.kind == "depthwise") {
    // The channel's own filter, (KD, KH, KW) weights after the previous channels'.
    take = "acc[j] += " + plan.pooled + " * sa_load(weight[((c * " + c(plan.kernel[0]) +
           " + kd) * " + c(plan.kernel[1]) + " + kh) * " + c(plan.kernel[2]) + " + kw]);";
  } else {
    take = "acc[j] += " + plan.pooled + ";";
  }
  s += loops +
       "#pragma unroll\n"
       "        for (int q = 0; q < (OPT - 1) * " +
       stride + " + " + c((plan.kernel[2] - 1) * plan.dilation[2] + 1) +
       "; ++q) {\n"
       "          const Ix w = w_first + q;\n"
       "          if (w < 0 || w >= IW) continue;\n" +
       element +
       "#pragma unroll\n"
       "          for (int j = 0; j < OPT; ++j) {\n"
       "            const int at = q - j * " +
       stride +
       ";  // from output j's window's first element\n"
       "            if (at < 0 || at % " +
       dilation + " != 0 || at / " + dilation + " >= " + c(plan.kernel[2]) + ") continue;\n" +
       (plan.kind == "depthwise" ? "            const int kw = at / " + dilation + ";\n" : "") +
       "            " + take + "\n          }\n        }\n" + close;
  s += "#pragma unroll\n"
       "    for (int j = 0; j < OPT; ++j) {\n"
       "      const Ix ow = ow0 + j;\n"
       "      if (ow >= OW) break;\n";
  if (max) {
    s += "      const float pooled = acc[j];\n";
  } else if (plan.kind == "depthwise") {
    s += "      const float pooled = acc[j]" +
         std::string(plan.bias >= 0 ? " + sa_load(bias[c])" : "") + ";\n";
  } else {
    // The divisor: the override, or the window's size clipped to the padded input (whose size
    // counts padding), or that clipped again to the input.
    std::string count = c(plan.divisor);
    if (plan.divisor <= 0) {
      for (int d = 0; d < 3; ++d) {
        const std::string x = dims[d], in = sizes[d], pad = c(plan.padding[d]);
        s += "      Ix " + x + "0 = " + outs[d] + " * " + c(plan.stride[d]) + " - " + pad +
             ";\n      Ix " + x + "1 = " + x + "0 + " + c(plan.kernel[d]) + " < " + in + " + " +
             pad + " ? " + x + "0 + " + c(plan.kernel[d]) + " : " + in + " + " + pad + ";\n";
      }
      count = "(d1 - d0) * (h1 - h0) * (w1 - w0)";
      if (!plan.count_include_pad) {
        for (int d = 0; d < 3; ++d) {
          const std::string x = dims[d];
          s += "      " + x + "0 = " + x + "0 > 0 ? " + x + "0 : 0;\n      " + x + "1 = " + x +
               "1 < " + sizes[d] + " ? " + x + "1 : " + sizes[d] + ";\n";
        }
      }
    }
    s += "      const float pooled = acc[j] / (float)(" + count + ");\n";
  }
  return s + epilogue(plan, after) + "    }\n";
}

/// The body for work item o: OPT neighbouring output elements of one output row (along W),
/// the same for both backends.
std::string body(const PoolPlan& plan) {
  std::string s =
      "    const Ix row = by_groups.quot(o), ow0 = (o - row * OWG) * OPT;\n"
      "    Ix t = by_oh.quot(row);\n"
      "    const Ix oh = row - t * OH;\n"
      "    const Ix u = by_od.quot(t);\n"
      "    const Ix od = t - u * OD;\n"
      "    const Ix n = by_c.quot(u), c = u - n * C;\n";
  const SideCode before = side_code(plan, false, "    ", "          ");
  const SideCode after = side_code(plan, true, "    ", "      ");
  // What the thread's windows and outputs share, before them: the ops of per-channel inputs.
  s += before.once + after.once;
  return s + (plan.kind == "adaptive_avg" ? adaptive_body(plan, before.each, after.each)
                                          : fixed_body(plan, before.each, after.each));
}

/// The outputs of a row a thread takes by default. Fixed windows (a pooling's, a filter's)
/// overlap or abut along W, so a thread's two neighbouring outputs share the cache lines they
/// read and one split of the index into (n, c, d, h). On an H100 (bench/synth_kernels.py
/// --configs), with each output's window still read on its own, two a thread were 4-16% faster
/// than one for 2D and 3D max pooling and 1D average pooling, and within 2% of it for a 3x3
/// depthwise convolution. An adaptive window spans the input over the few outputs: there one
/// output a thread, with twice the threads at work, was twice as fast as two.
int default_outputs(const PoolPlan& plan) { return plan.kind == "adaptive_avg" ? 1 : 2; }

}  // namespace

std::string divider_source(const std::string& device) {
  const bool cuda = device == "cuda";
  const std::string member = cuda ? "__device__ __forceinline__ " : "inline ";
  return std::string(cuda ? "SA_FN uint32_t sa_umulhi(uint32_t a, uint32_t b) { return __umulhi(a, "
                            "b); }\n"
                          : "SA_FN uint32_t sa_umulhi(uint32_t a, uint32_t b) {\n"
                            "  return (uint32_t)(((uint64_t)a * b) >> 32);\n}\n") +
         "template <class Ix> struct sa_divider {\n"
         "  Ix d;\n"
         "  explicit sa_divider(Ix divisor) : d(divisor) {}\n"
         "  " +
         member +
         "Ix quot(Ix x) const { return x / d; }\n"
         "};\n"
         "template <> struct sa_divider<int32_t> {\n"
         "  uint32_t magic, shift;\n"
         "  explicit sa_divider(int32_t d) {  // d >= 1\n"
         "    shift = 0;\n"
         "    while (shift < 31 && (1u << shift) < (uint32_t)d) ++shift;\n"
         "    magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - (uint32_t)d)) /\n"
         "                       (uint32_t)d + 1);\n"
         "  }\n"
         "  " +
         member +
         "int32_t quot(int32_t x) const {  // 0 <= x < 2^31\n"
         "    return (int32_t)((sa_umulhi((uint32_t)x, magic) + (uint32_t)x) >> shift);\n"
         "  }\n"
         "};\n";
}

std::string pool_kernel_source(const PoolPlan& plan, const std::string& device) {
  const bool cuda = device == "cuda";
  std::string params, args, widest;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    params +=
        "const " + element_type(plan.inputs[k].dtype) + "* __restrict__ in" + n(k) + "_data, ";
    args += "in" + n(k) + "_data, ";
  }
  if (plan.kind == "depthwise") {  // the filters and the bias, after the inputs
    params += "const " + element_type(plan.weight_dtype) + "* __restrict__ weight, ";
    args += "weight, ";
    if (plan.bias >= 0) {
      params += "const " + element_type(plan.weight_dtype) + "* __restrict__ bias, ";
      args += "bias, ";
    }
  }
  params += element_type(plan.output_dtype) +
            "* __restrict__ out, int64_t N, int64_t C, int64_t ID, int64_t IH, int64_t IW, "
            "int64_t OD, int64_t OH, int64_t OW";
  args += "out, N, C, ID, IH, IW, OD, OH, OW";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    const std::string in = "in" + n(k);
    for (const char* d : {"sn", "sc", "sd", "sh", "sw"}) {
      params += ", int64_t " + in + "_" + d;
      args += ", " + in + "_" + d;
    }
    const char* o = plan.inputs[k].after ? "O" : "I";
    widest += "  reach = sa_max64(reach, (N - 1) * " + in + "_sn + (C - 1) * " + in + "_sc + (" +
              o + "D - 1) * " + in + "_sd + (" + o + "H - 1) * " + in + "_sh + (" + o +
              "W - 1) * " + in + "_sw);\n";
  }
  std::string source = "// Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                       " in one kernel, a thread OPT outputs of a row walking their windows.\n"
                       "#include <math.h>\n#include <stdint.h>\n";
  const std::string helpers = dtype_helpers(device) + kExpressionHelpers + divider_source(device);
  // Indices of type Ix: int32_t where every element and offset fits, which spares each thread
  // 64-bit arithmetic and lets a division be a multiply. A work item is OPT outputs of a row,
  // OWG = ceil(OW / OPT) items a row; the dividers split an item into its row's (n, c, od, oh).
  std::string kernel_params = params;
  for (std::size_t at = 0; (at = kernel_params.find("int64_t ", at)) != std::string::npos;)
    kernel_params.replace(at, 8, "Ix ");
  kernel_params +=
      ", Ix OWG, sa_divider<Ix> by_groups, sa_divider<Ix> by_oh, sa_divider<Ix> by_od, "
      "sa_divider<Ix> by_c";
  const std::string launch_args =
      args +
      ", (Ix)OWG, sa_divider<Ix>((Ix)OWG), sa_divider<Ix>((Ix)OH), sa_divider<Ix>((Ix)OD), "
      "sa_divider<Ix>((Ix)C)";
  // The farthest element any input is read at, and the input's sizes.
  const std::string reach_lines =
      "  int64_t reach = sa_max64(total, N * C * ID * IH * IW);\n" + widest;
  if (cuda) {
    source +=
        "#include <cuda_runtime.h>\n\n#define SA_FN static __device__ __forceinline__\n" + helpers +
        kCudaGridHelper +
        "\ntemplate <class Ix, int OPT>\n"
        "static __global__ void __launch_bounds__(512) fused_pool_kernel(" +
        kernel_params +
        ") {\n"
        "  const Ix items = N * C * OD * OH * OWG;\n"
        "  for (Ix o = (Ix)blockIdx.x * (Ix)blockDim.x + (Ix)threadIdx.x; o < items;\n"
        "       o += (Ix)gridDim.x * (Ix)blockDim.x) {\n" +
        body(plan) +
        "  }\n}\n\n"
        "// The launch configuration model_new.py chose: 128 << (config % 3) threads a block,\n"
        "// each thread 1 << (config / 3) outputs of a row; -1: 128 threads, " +
        n(default_outputs(plan)) +
        " each.\n"
        "static int sa_config = -1;\n"
        "extern \"C\" int fused_pool_config(int64_t config) {\n"
        "  sa_config = config >= 0 && config < 9 ? (int)config : -1;\n"
        "  return 0;\n}\n\n"
        "static int64_t sa_max64(int64_t a, int64_t b) { return a > b ? a : b; }\n\n"
        "template <class Ix, int OPT>\n"
        "static void sa_launch(" +
        params +
        ", int threads, cudaStream_t s) {\n"
        "  const int64_t OWG = (OW + OPT - 1) / OPT;\n"
        "  const unsigned grid = sa_grid((N * C * OD * OH * OWG + threads - 1) / threads);\n"
        "  fused_pool_kernel<Ix, OPT><<<grid, threads, 0, s>>>(" +
        launch_args +
        ");\n}\n\n"
        "template <class Ix>\n"
        "static void sa_launch_opt(" +
        params +
        ", int threads, int opt, cudaStream_t s) {\n"
        "  if (opt == 4) sa_launch<Ix, 4>(" +
        args +
        ", threads, s);\n"
        "  else if (opt == 2) sa_launch<Ix, 2>(" +
        args +
        ", threads, s);\n"
        "  else sa_launch<Ix, 1>(" +
        args +
        ", threads, s);\n}\n\n"
        "extern \"C\" int fused_pool(" +
        params +
        ", void* stream) {\n"
        "  const int64_t total = N * C * OD * OH * OW;\n"
        "  if (total == 0) return 0;\n"
        "  const int threads = sa_config >= 0 ? 128 << (sa_config % 3) : 128;\n"
        "  const int opt = sa_config >= 0 ? 1 << (sa_config / 3) : " +
        n(default_outputs(plan)) + ";\n" + reach_lines +
        "  cudaStream_t s = (cudaStream_t)stream;\n"
        "  const int64_t overshoot = ((total + threads - 1) / threads + 1) * threads;\n"
        "  if (reach < INT32_MAX - overshoot)\n"
        "    sa_launch_opt<int32_t>(" +
        args +
        ", threads, opt, s);\n"
        "  else\n"
        "    sa_launch_opt<int64_t>(" +
        args + ", threads, opt, s);\n  return (int)cudaGetLastError();\n}\n";
  } else {
    source += "#include <omp.h>\n\n#define SA_FN static inline\n" + helpers +
              cpu_config_source("fused_pool") +
              "static int64_t sa_max64(int64_t a, int64_t b) { return a > b ? a : b; }\n\n"
              "template <class Ix>\n"
              "static void sa_run(" +
              kernel_params +
              ") {\n"
              "  const int OPT = " +
              n(default_outputs(plan)) +
              ";  // outputs of a row a work item\n"
              "  const Ix items = N * C * OD * OH * OWG;\n"
              "#pragma omp parallel for schedule(runtime)\n"
              "  for (Ix o = 0; o < items; ++o) {\n" +
              body(plan) +
              "  }\n}\n\n"
              "extern \"C\" int fused_pool(" +
              params +
              ", void* stream) {\n"
              "  (void)stream;\n"
              "  sa_apply_config();\n"
              "  const int64_t total = N * C * OD * OH * OW;\n"
              "  if (total == 0) return 0;\n"
              "  const int64_t OWG = (OW + " +
              n(default_outputs(plan) - 1) + ") / " + n(default_outputs(plan)) + ";\n" +
              reach_lines +
              "  if (reach < INT32_MAX) {\n"
              "    typedef int32_t Ix;\n"
              "    sa_run<Ix>(" +
              launch_args +
              ");\n"
              "  } else {\n"
              "    typedef int64_t Ix;\n"
              "    sa_run<Ix>(" +
              launch_args + ");\n  }\n  return 0;\n}\n";
  }
  return source;
}

std::string pool_model_source(const Graph& graph, const PoolPlan& plan) {
  const auto list = [](const std::vector<std::int64_t>& v) {
    return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) +
           ")";
  };
  std::string s = "\"\"\"Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                  " in one kernel (kernels/).\"\"\"\n\n"
                  "import torch\nimport torch.nn as nn\n\nfrom utils.kernels import load\n\n"
                  "lib = load()\nfused_pool = lib.bind(\"fused_pool\", ";
  const std::size_t filters = plan.kind != "depthwise" ? 0 : plan.bias >= 0 ? 2 : 1;
  for (std::size_t k = 0; k <= plan.inputs.size() + filters; ++k) s += "\"tensor\", ";
  s += "\"i64\", \"i64\", \"i64\", \"i64\", \"i64\", \"i64\", \"i64\", \"i64\"";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k)
    s += ", \"i64\", \"i64\", \"i64\", \"i64\", \"i64\"";
  s += ", \"stream\")\n" + model_config_source("fused_pool") + "\n";
  std::string after;
  for (const ElementInput& in : plan.inputs) after += in.after ? "True, " : "False, ";
  s += "KIND = \"" + plan.kind + "\"\nLEADING = " + std::to_string(plan.leading) +
       "  # the pooled input's dims before its spatial ones\n"
       "# Per dim of (D, H, W): the window (1, 1 and 0 where the op has no such dim).\n"
       "KERNEL = " +
       list(plan.kernel) + "\nSTRIDE = " + list(plan.stride) + "\nPADDING = " + list(plan.padding) +
       "\nDILATION = " + list(plan.dilation) + "\nOUTPUT_SIZE = " + list(plan.output_size) +
       "\nCEIL_MODE = " + (plan.ceil_mode ? "True" : "False") + "\nAFTER = (" + after +
       ")  # per input, read after the pooling (at the output's positions) or before\n\n\n"
       "def pooled_size(size, d):\n"
       "    \"\"\"torch's output size along spatial dim d (of D, H, W) for an input size.\"\"\"\n"
       "    if KIND == \"adaptive_avg\":\n"
       "        return OUTPUT_SIZE[d]\n"
       "    span = DILATION[d] * (KERNEL[d] - 1) + 1\n"
       "    top = size + 2 * PADDING[d] - span\n"
       "    out = (top + (STRIDE[d] - 1 if CEIL_MODE else 0)) // STRIDE[d] + 1\n"
       "    if CEIL_MODE and (out - 1) * STRIDE[d] >= size + PADDING[d]:\n"
       "        out -= 1  # the last window must start inside the input or its left padding\n"
       "    return out\n\n\n"
       "def as_ncdhw(values, rank, fill):\n"
       "    \"\"\"Per-dim values of a tensor of the pooled input's rank as (N, C, D, H, W).\"\"\"\n"
       "    lead = list(values[:LEADING])\n"
       "    spatial = list(values[LEADING:])\n"
       "    return [fill] * (2 - LEADING) + lead + [fill] * (3 - len(spatial)) + spatial\n\n\n"
       "def steps_of(own, stride, shape):\n"
       "    \"\"\"The strides (N, C, D, H, W) of a tensor of shape own and strides stride read at "
       "the\n"
       "    positions of shape, which it broadcasts to: 0 along a dim it does not have or has "
       "once.\"\"\"\n"
       "    offset = len(shape) - len(own)\n"
       "    out = [0 if k < offset or own[k - offset] == 1 else stride[k - offset]\n"
       "           for k in range(len(shape))]\n"
       "    return as_ncdhw(out, len(shape), 0)\n\n\n"
       "def launch_sizes(shapes, strides):\n"
       "    \"\"\"out's shape and the kernel's sizes after it ((N, C, D, H, W) in, (D, H, W) out, "
       "then\n"
       "    each input's strides) for inputs of these shapes and strides.\"\"\"\n"
       "    # The pooling's input shape: what the inputs read before it broadcast to.\n"
       "    shape = []\n"
       "    for sizes, later in zip(shapes, AFTER):\n"
       "        if not later:\n"
       "            shape = [1] * (len(sizes) - len(shape)) + shape\n"
       "            for k, size in enumerate(sizes):\n"
       "                at = len(shape) - len(sizes) + k\n"
       "                shape[at] = size if size != 1 else shape[at]\n"
       "    spatial = len(shape) - LEADING\n"
       "    out_shape = shape[:LEADING] + [pooled_size(size, 3 - spatial + k)\n"
       "                                   for k, size in enumerate(shape[LEADING:])]\n"
       "    sizes = as_ncdhw(shape, len(shape), 1) + as_ncdhw(out_shape, len(shape), 1)[2:]\n"
       "    for own, stride, later in zip(shapes, strides, AFTER):\n"
       "        sizes += steps_of(own, stride, out_shape if later else shape)\n"
       "    return out_shape, sizes\n\n\n";
  std::string filter_args;  // a depthwise convolution's weight and bias
  for (int v : {plan.weight, plan.bias}) {
    if (v >= 0) filter_args += value_expression(graph.values[v]) + ", ";
  }
  s += model_class_head(graph, values_of(plan.inputs), kLayoutMemoInit) +
       layout_memo_lines("out_shape, sizes", "launch_sizes") +
       "        out = torch.empty(out_shape, dtype=torch." + plan.output_dtype +
       ", device=inputs[0].device)\n"
       "        fused_pool(*inputs, " +
       filter_args +
       "out, *sizes)\n"
       "        return out" +
       graph.output_view + "\n";
  return s;
}

Status synthesize_pool(const Graph& graph, const std::string& device, Candidate* candidate) {
  PoolPlan plan;
  if (Status s = plan_pool(graph, &plan); !s.ok()) return s;
  const std::string kernel = pool_kernel_source(plan, device);
  candidate->files["model_new.py"] = pool_model_source(graph, plan);
  candidate->files[device == "cuda" ? "kernels/fused_pool.cu" : "kernels/fused_pool.cpp"] = kernel;
  if (device == "cuda") {
    // Config id: 128 << (id % 3) threads, 1 << (id / 3) outputs a thread; -1 the default.
    if (default_outputs(plan) == 1) {
      candidate->configs = {{-1, "128 threads"},
                            {1, "256 threads"},
                            {2, "512 threads"},
                            {3, "128 threads x 2 outputs"}};
    } else {
      candidate->configs = {{-1, "128 threads x 2 outputs"},
                            {0, "128 threads"},
                            {1, "256 threads"},
                            {4, "256 threads x 2 outputs"},
                            {6, "128 threads x 4 outputs"},
                            {7, "256 threads x 4 outputs"}};
    }
  } else {
    candidate->configs = cpu_schedules();
  }
  candidate->pattern = sha256_hex(kernel);
  long long total = 1;
  for (std::int64_t size : plan.output_shape) total *= size;
  candidate->shape_class = size_class(total) + " outputs";
  return Status::OK();
}

}  // namespace cuda_agent::synth
