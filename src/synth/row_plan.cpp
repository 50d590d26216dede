#include "synth/row_plan.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "synth/expression.h"
#include "synth/model_source.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

/// What the plan knows of a value it has made or read.
struct Info {
  std::string variable;
  bool per_element = false;
  int level = 0;
  std::vector<int> dims;  // the dim of F each of its dims lands on
  bool keepdim = true;    // a per-row value: the reduced dims are still there, as size 1
  bool index = false;     // int64 indices
  bool exact = true;      // its float32 bits are torch's (rounds_exactly), so it may be rounded
  // For a value that is a tuple (max.dim): the infos of its elements.
  std::vector<Info> elements;
};

class Planner {
 public:
  explicit Planner(const Graph& graph) : graph_(graph) {}

  Status plan(RowPlan* out) {
    const Op* anchor = nullptr;
    for (const Op& op : graph_.ops) {
      if (op.op_class == OpClass::kReduction || op.op_class == OpClass::kSoftmax ||
          op.op_class == OpClass::kNormalization) {
        anchor = &op;
        break;
      }
    }
    if (!anchor) return Status::InvalidArgument("no row plan: the graph reduces nothing");
    if (!set_iteration_space(*anchor)) return failure();
    for (const Op& op : graph_.ops) {
      if (!plan_op(op)) break;
    }
    if (problems_.empty()) plan_outputs();
    if (!problems_.empty()) return failure();
    for (const auto& a : p_.accumulators) p_.passes = std::max(p_.passes, a.pass);
    *out = std::move(p_);
    return Status::OK();
  }

 private:
  Status failure() const {
    return Status::InvalidArgument("no fused row kernel for this graph:\n  " +
                                   join(problems_, "\n  "));
  }
  bool refuse(const std::string& problem) {
    problems_.push_back(problem);
    return false;
  }

  const TensorType* tensor_of(int value) const {
    const Value& v = graph_.values[value];
    return v.results.size() == 1 ? &v.results[0] : nullptr;
  }

  /// The value an argument names, or -1.
  int ref(const json& argument) const {
    if (argument.is_object() && argument.contains("ref")) {
      return graph_.find(argument["ref"].get<std::string>());
    }
    return -1;
  }

  /// D from a list of dims (or one dim, or null: all) of a rank-`rank` tensor; false when they
  /// are not one run of consecutive dims.
  static bool reduced_dims(const json& dims, int rank, int* first, int* last) {
    std::vector<int> d;
    if (dims.is_number_integer()) d.push_back(dims.get<int>());
    if (dims.is_array()) {
      for (const auto& x : dims) d.push_back(x.get<int>());
    }
    if (d.empty()) {
      for (int k = 0; k < rank; ++k) d.push_back(k);
    }
    for (int& k : d) k = k < 0 ? k + rank : k;
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    if (d.front() < 0 || d.back() >= rank) return false;
    if (d.back() - d.front() + 1 != static_cast<int>(d.size())) return false;
    *first = d.front();
    *last = d.back();
    return true;
  }

  /// The dims argument of a reduction op, by its schema.
  static json dims_argument(const Op& op) {
    const std::string& n = op.name;
    if (n == "softmax" || n == "log_softmax" || n == "_softmax" || n == "_log_softmax" ||
        n == "max" || n == "min" || n == "logsumexp" || n == "sum" || n == "mean" || n == "amax" ||
        n == "amin" || n == "argmax" || n == "argmin" || n == "var" || n == "std") {
      if (op.target == "aten.sum.default" || op.target == "aten.mean.default") return nullptr;
      return argument(op, 1, "dim");
    }
    if (n == "linalg_vector_norm") return argument(op, 2, "dim");
    return nullptr;
  }

  bool set_iteration_space(const Op& anchor) {
    int x = anchor.inputs.empty() ? -1 : anchor.inputs[0];
    const TensorType* t = x >= 0 ? tensor_of(x) : nullptr;
    if (!t) return refuse(anchor.target + " reads no single tensor");
    f_ = t->shape;
    p_.sizes = f_;
    p_.rank = static_cast<int>(f_.size());
    if (p_.rank == 0) return refuse(anchor.target + " reduces a scalar");
    int first = 0, last = 0;
    bool ok;
    if (anchor.name == "instance_norm") {  // per (sample, channel), over the other dims
      ok = p_.rank >= 3;
      first = 2;
      last = p_.rank - 1;
    } else if (anchor.name == "layer_norm" || anchor.name == "rms_norm") {
      const json& shape = argument(anchor, 1, "normalized_shape");
      int n = shape.is_array() ? static_cast<int>(shape.size()) : 0;
      ok = n >= 1 && n <= p_.rank;
      first = p_.rank - n;
      last = p_.rank - 1;
    } else {
      ok = anchor.op_class != OpClass::kNormalization &&
           reduced_dims(dims_argument(anchor), p_.rank, &first, &last);
    }
    if (!ok) return refuse(anchor.target + " does not reduce one run of consecutive dims");
    p_.first_reduced = first;
    p_.last_reduced = last;
    return true;
  }

  bool reduces_d(const Op& op, const json& dims) {
    int first = 0, last = 0;
    if (!reduced_dims(dims, p_.rank, &first, &last) || first != p_.first_reduced ||
        last != p_.last_reduced) {
      return refuse(op.target + " reduces other dims than the plan's rows, " +
                    std::to_string(p_.first_reduced) + ".." + std::to_string(p_.last_reduced));
    }
    return true;
  }

  bool in_d(int f) const { return f >= p_.first_reduced && f <= p_.last_reduced; }

  std::vector<int> identity() const {
    std::vector<int> d(p_.rank);
    for (int k = 0; k < p_.rank; ++k) d[k] = k;
    return d;
  }
  std::vector<int> without_d() const {
    std::vector<int> d;
    for (int k = 0; k < p_.rank; ++k) {
      if (!in_d(k)) d.push_back(k);
    }
    return d;
  }

  /// The variable of an input, parameter or buffer read with its dims landing on `dims`.
  bool read_input(int value, const std::vector<int>& dims, Info* info) {
    const Value& v = graph_.values[value];
    const TensorType* t = tensor_of(value);
    if (!t || !is_input_dtype(t->dtype)) {
      return refuse("input " + v.name + " is not one float32, bfloat16, float16 or bool tensor");
    }
    bool per_element = false, per_row = false;
    std::vector<bool> covered(p_.rank, false);  // the dims of F along which it varies
    for (std::size_t j = 0; j < dims.size(); ++j) {
      if (t->shape[j] == 1) continue;
      if (t->shape[j] != f_[dims[j]]) {
        return refuse("input " + v.name + " does not broadcast to the rows' shape");
      }
      per_element = per_element || in_d(dims[j]);
      per_row = per_row || !in_d(dims[j]);
      covered[dims[j]] = true;
    }
    bool segmented = false;
    std::int64_t run = 1;  // the product of F's reduced sizes past the last it varies along
    for (int d = p_.first_reduced; per_element && d <= p_.last_reduced; ++d) {
      segmented = segmented || (!covered[d] && f_[d] > 1);
      run = covered[d] ? 1 : run * f_[d];
    }
    for (std::size_t k = 0; k < p_.inputs.size(); ++k) {
      if (p_.inputs[k].value != value) continue;
      if (p_.inputs[k].dims != dims) {
        return refuse("input " + v.name + " is broadcast in two ways");
      }
      *info = known_[value];
      return true;
    }
    Info in;
    in.variable = "in" + std::to_string(p_.inputs.size());
    in.per_element = per_element;
    in.dims = dims;
    p_.inputs.push_back(
        {value, dims, per_element, segmented, segmented ? run : 1, per_row, t->dtype});
    known_[value] = in;
    *info = in;
    return true;
  }

  std::string fresh() { return "v" + std::to_string(next_++); }

  /// A line computing expression, as a new variable.
  std::string emit(bool per_element, int level, const std::string& expression,
                   const char* type = "float") {
    std::string name = fresh();
    p_.lines.push_back({per_element, level,
                        "const " + std::string(type) + " " + name + " = " + expression + ";", name,
                        type});
    return name;
  }

  /// The accumulator of kind over operand in pass: one per distinct triple, so that mean and
  /// std of the same row (or two norms of it) share their sums.
  std::string accumulate(const std::string& kind, const std::string& operand, int pass) {
    for (const RowAccumulator& a : p_.accumulators) {
      if (a.kind == kind && a.operand == operand && a.pass == pass) return a.name;
    }
    std::string name = "a" + std::to_string(p_.accumulators.size());
    p_.accumulators.push_back({name, kind, operand, pass});
    return name;
  }

  /// The operand's info for a reduction-like op: one per-element value of F's full rank.
  bool full_operand(const Op& op, Info* x) {
    int value = op.inputs.empty() ? -1 : op.inputs[0];
    if (value < 0) return refuse(op.target + " reads no tensor");
    if (!operand_info(value, identity(), x)) return false;
    if (!x->per_element || x->dims != identity()) {
      return refuse(op.target + " reads a value that does not run along the rows");
    }
    return true;
  }

  /// The info of a value an op reads, reading an input with the given dims.
  bool operand_info(int value, const std::vector<int>& dims, Info* info) {
    auto it = known_.find(value);
    if (it != known_.end()) {
      *info = it->second;
      return true;
    }
    if (graph_.values[value].kind == "op") {
      return refuse(graph_.values[value].name + " is read before the plan has made it");
    }
    return read_input(value, dims, info);
  }

  /// A per-row result: keepdim from the op's arguments.
  Info row_result(const std::string& variable, int level, bool keepdim, bool index = false) {
    Info r;
    r.variable = variable;
    r.level = level;
    r.keepdim = keepdim;
    r.dims = keepdim ? identity() : without_d();
    r.index = index;
    return r;
  }

  bool plan_op(const Op& op) {
    if (is_elementwise_op(op.name)) return plan_elementwise(op);
    switch (op.op_class) {
      case OpClass::kReduction:
        return plan_reduction(op);
      case OpClass::kSoftmax:
        return plan_softmax(op);
      case OpClass::kNormalization:
        return plan_normalization(op);
      case OpClass::kLayout:
        return plan_layout(op);
      case OpClass::kScan:
        if (op.name == "arange") return plan_position(op);
        return refuse(op.target + " is not an op the row kernel fuses");
      default:
        return refuse(op.target + " is not an op the row kernel fuses");
    }
  }

  /// torch.arange along the one reduced dim, the last of F: each element's position in its
  /// row, start + step * k, from the kernel's own index rather than a tensor.
  bool plan_position(const Op& op) {
    const TensorType* t = tensor_of(op.value);
    const int last = p_.rank - 1;
    if (!t || t->shape.size() != 1 || p_.first_reduced != last || p_.last_reduced != last ||
        t->shape[0] != f_[last]) {
      return refuse(op.target + " does not run along the rows");
    }
    if (!is_float_dtype(t->dtype)) return refuse(op.target + " makes " + t->dtype + " positions");
    Info result;
    const std::string at = position_expression(op, &result.exact);
    if (at.empty()) return refuse(op.target + " with a start or step that is no number");
    result.per_element = true;
    result.dims = {last};
    result.variable = emit(true, 0, at);
    known_[op.value] = result;
    p_.ops.push_back(op.name);
    return true;
  }

  bool plan_elementwise(const Op& op) {
    const TensorType* t = tensor_of(op.value);
    // A comparison's bool is held as 1.0f or 0.0f, like a bool input.
    if (!t || !(is_float_dtype(t->dtype) || t->dtype == "bool")) {
      return refuse(op.target + " does not make one float32, bfloat16, float16 or bool tensor");
    }
    const int r = static_cast<int>(t->shape.size());
    // The dims the result lands on: those of a made operand of the same rank, else F's last r.
    std::vector<int> dims;
    for (int value : op.inputs) {
      auto it = known_.find(value);
      if (it != known_.end() && static_cast<int>(it->second.dims.size()) == r) {
        dims = it->second.dims;
        break;
      }
    }
    if (dims.empty()) {
      if (r > p_.rank) return refuse(op.target + " makes a value of higher rank than the rows");
      std::vector<int> all = identity();
      dims.assign(all.end() - r, all.end());
    }
    Info result;
    result.dims = dims;
    result.exact = rounds_exactly(op);
    std::vector<std::string> operands;
    for (std::size_t a = 0; op.args.is_array() && a < op.args.size(); ++a) {
      int value = ref(op.args[a]);
      if (value < 0) {
        operands.push_back("");
        continue;
      }
      const TensorType* ot = tensor_of(value);
      if (!ot) return refuse(op.target + " reads a value that is not one tensor");
      const int rank = static_cast<int>(ot->shape.size());
      if (rank > r) return refuse(op.target + " broadcasts an operand down");
      std::vector<int> operand_dims(dims.end() - rank, dims.end());
      Info x;
      if (!operand_info(value, operand_dims, &x)) return false;
      if (x.index) return refuse(op.target + " computes with indices");
      if (x.dims != operand_dims) {
        return refuse(op.target + " combines a reduced value with values along other dims");
      }
      result.per_element = result.per_element || x.per_element;
      result.level = std::max(result.level, x.level);
      result.exact = result.exact && x.exact;
      operands.push_back(x.variable);
    }
    std::string problem;
    std::string expression = elementwise_expression(op, operands, &problem);
    if (result.exact) expression = rounded(expression, t->dtype);
    if (!problem.empty()) return refuse(problem);
    if (!result.per_element) {
      // A per-row value keeps the reduced dims (as 1) when its operands did.
      result.keepdim = r == p_.rank;
    }
    result.variable = emit(result.per_element, result.level, expression);
    known_[op.value] = result;
    p_.ops.push_back(op.name);
    return true;
  }

  bool keepdim_argument(const Op& op, std::size_t index) {
    const json& k = argument(op, index, "keepdim");
    return k.is_boolean() && k.get<bool>();
  }

  /// mean and biased-or-corrected variance of x over the row: (mean, variance) variables, at
  /// level x.level + 1. One pass: each thread sums its elements' deviations from its first
  /// and their squares, and the threads' counts, means and sums of squared deviations merge
  /// pairwise (Chan, Golub and LeVeque), as accurate as a second pass over x - mean.
  std::pair<std::string, std::string> moments(const Info& x, double correction) {
    int l = x.level;
    std::string a = accumulate("moments", x.variable, l + 1);
    std::string mean = emit(false, l + 1, a);
    std::string var = emit(false, l + 1, a + "_m2 / (float)(R - " + literal(correction) + ")");
    return {mean, var};
  }

  /// (max, sum of exp(x - max)) over the row in one pass, at level x.level + 1: the sum is kept
  /// relative to the running maximum and rescaled when the maximum grows.
  std::pair<std::string, std::string> exp_sum(const Info& x) {
    std::string a = accumulate("lse", x.variable, x.level + 1);
    return {a, a + "_s"};
  }

  bool plan_reduction(const Op& op) {
    Info x;
    if (!full_operand(op, &x)) return false;
    const std::string& n = op.name;
    const int l = x.level;
    Info result;
    if (n == "sum" || n == "mean") {
      bool all = op.target == "aten.sum.default" || op.target == "aten.mean.default";
      if (!reduces_d(op, all ? json(nullptr) : dims_argument(op))) return false;
      if (!argument(op, all ? 1 : 3, "dtype").is_null()) {
        return refuse(op.target + " with a dtype");
      }
      std::string a = accumulate("sum", x.variable, l + 1);
      result = row_result(emit(false, l + 1, n == "sum" ? a : a + " / (float)R"), l + 1,
                          !all && keepdim_argument(op, 2));
    } else if (n == "amax" || n == "amin") {
      if (!reduces_d(op, dims_argument(op))) return false;
      std::string a = accumulate(n == "amax" ? "max" : "min", x.variable, l + 1);
      result = row_result(emit(false, l + 1, a), l + 1, keepdim_argument(op, 2));
    } else if ((n == "max" || n == "min") && op.target.find(".dim") != std::string::npos) {
      if (!reduces_d(op, dims_argument(op))) return false;
      std::string a = accumulate(n == "max" ? "argmax" : "argmin", x.variable, l + 1);
      bool keep = keepdim_argument(op, 2);
      result.elements = {row_result(emit(false, l + 1, a), l + 1, keep),
                         row_result(emit(false, l + 1, a + "_i", "int64_t"), l + 1, keep, true)};
    } else if (n == "argmax" || n == "argmin") {
      if (argument(op, 1, "dim").is_null()) return refuse(op.target + " over all dims");
      if (!reduces_d(op, dims_argument(op))) return false;
      std::string a = accumulate(n, x.variable, l + 1);
      result =
          row_result(emit(false, l + 1, a + "_i", "int64_t"), l + 1, keepdim_argument(op, 2), true);
    } else if (n == "logsumexp") {
      if (!reduces_d(op, dims_argument(op))) return false;
      auto [shift, s] = exp_sum(x);
      result = row_result(emit(false, l + 1, shift + " + logf(" + s + ")"), l + 1,
                          keepdim_argument(op, 2));
    } else if (n == "linalg_vector_norm") {
      if (!reduces_d(op, dims_argument(op))) return false;
      if (!argument(op, 4, "dtype").is_null()) return refuse(op.target + " with a dtype");
      const json& ord_arg = argument(op, 1, "ord");
      double ord = ord_arg.is_number() ? ord_arg.get<double>() : 2.0;
      if (ord_arg.is_string()) {  // "inf" / "-inf" as the graph IR writes infinities
        ord = ord_arg.get<std::string>()[0] == '-' ? -INFINITY : INFINITY;
      }
      std::string magnitude = emit(true, l, "fabsf(" + x.variable + ")");
      std::string value;
      if (std::isinf(ord)) {
        std::string a = accumulate(ord > 0 ? "max" : "min", magnitude, l + 1);
        value = emit(false, l + 1, a);
      } else if (ord == 0) {
        std::string a =
            accumulate("sum", emit(true, l, "(" + x.variable + " != 0.0f ? 1.0f : 0.0f)"), l + 1);
        value = emit(false, l + 1, a);
      } else if (ord == 1) {
        value = emit(false, l + 1, accumulate("sum", magnitude, l + 1));
      } else if (ord == 2) {
        std::string a = accumulate("sum", emit(true, l, x.variable + " * " + x.variable), l + 1);
        value = emit(false, l + 1, "sqrtf(" + a + ")");
      } else {
        std::string a = accumulate(
            "sum", emit(true, l, "powf(" + magnitude + ", " + literal(ord) + ")"), l + 1);
        value = emit(false, l + 1, "powf(" + a + ", " + literal(1.0 / ord) + ")");
      }
      result = row_result(value, l + 1, keepdim_argument(op, 3));
    } else if (n == "var" || n == "std") {
      double correction = 1;
      bool keep = false;
      if (op.target.find(".correction") != std::string::npos) {
        const json& c = argument(op, 2, "correction");
        correction = c.is_number() ? c.get<double>() : 1;
        keep = keepdim_argument(op, 3);
      } else if (op.target.find(".dim") != std::string::npos) {
        const json& unbiased = argument(op, 2, "unbiased");
        correction = unbiased.is_boolean() && !unbiased.get<bool>() ? 0 : 1;
        keep = keepdim_argument(op, 3);
      } else {
        return refuse(op.target + " is a form of " + n + " the row kernel does not take");
      }
      if (!reduces_d(op, dims_argument(op))) return false;
      auto [mean, var] = moments(x, correction);
      result = row_result(n == "var" ? var : emit(false, l + 1, "sqrtf(" + var + ")"), l + 1, keep);
    } else {
      return refuse(op.target + " is a reduction the row kernel does not write");
    }
    // A maximum or minimum of exact values is one of them, rounded to the op's dtype as torch
    // stores it; a sum, taken in another order than torch's, stays in float32 (rounds_exactly).
    const auto& results = graph_.values[op.value].results;
    Info& values = result.elements.empty() ? result : result.elements[0];
    values.exact = x.exact && (n == "amax" || n == "amin" || n == "max" || n == "min");
    if (!results.empty() && results[0].dtype != "float32") {
      if (!is_float_dtype(results[0].dtype)) {
        return refuse(op.target + " makes " + results[0].dtype + " values");
      }
      if (values.exact) {
        values.variable = emit(false, values.level, rounded(values.variable, results[0].dtype));
      }
    }
    known_[op.value] = result;
    p_.ops.push_back(n);
    return true;
  }

  /// The dtype of the one tensor op makes.
  std::string dtype_of(const Op& op) const {
    const TensorType* t = tensor_of(op.value);
    return t ? t->dtype : "";
  }

  bool plan_softmax(const Op& op) {
    Info x;
    if (!full_operand(op, &x)) return false;
    if (!reduces_d(op, dims_argument(op))) return false;
    if (op.name == "softmax" || op.name == "log_softmax") {
      if (!argument(op, 2, "dtype").is_null()) return refuse(op.target + " with a dtype");
    } else if (argument(op, 2, "half_to_float").is_boolean() &&
               argument(op, 2, "half_to_float").get<bool>()) {
      return refuse(op.target + " with half_to_float");
    }
    auto [shift, s] = exp_sum(x);
    const int l = x.level + 1;
    Info result;
    result.per_element = true;
    result.level = l;
    result.dims = identity();
    result.exact = false;
    bool log = op.name.find("log") != std::string::npos;
    // Per element a subtraction (log) or an exponential and a product: the row's logarithm
    // or reciprocal is taken once.
    const std::string per_row = emit(false, l, log ? "logf(" + s + ")" : "1.0f / " + s);
    result.variable = emit(true, l,
                           log ? x.variable + " - " + shift + " - " + per_row
                               : "sa_exp_shifted(" + x.variable + " - " + shift + ") * " + per_row);
    known_[op.value] = result;
    p_.ops.push_back(op.name);
    return true;
  }

  /// A per-channel tensor argument (dims {1} of F), or "" when it is None.
  bool channel_argument(const Op& op, std::size_t index, const char* name, std::string* variable,
                        int* level) {
    int value = ref(argument(op, index, name));
    if (value < 0) return true;
    Info w;
    if (!operand_info(value, {1}, &w)) return false;
    if (w.dims != std::vector<int>{1})
      return refuse(op.target + "'s " + name + " is not per channel");
    *variable = w.variable;
    *level = std::max(*level, w.level);
    return true;
  }

  /// instance_norm: (x - mean) / sqrt(var + eps) * weight + bias with each (sample, channel)'s
  /// own mean and variance over the other dims, the weight and bias per channel. (batch_norm in
  /// eval mode is an elementwise affine map by then: rewrite.h.)
  bool plan_instance_norm(const Op& op) {
    const json& flag = argument(op, 5, "use_input_stats");
    if (!flag.is_boolean() || !flag.get<bool>()) {
      return refuse(op.target + " with running statistics");
    }
    if (p_.rank < 2) return refuse(op.target + " of a tensor without channels");
    int x_value = op.inputs.empty() ? -1 : op.inputs[0];
    Info x;
    if (x_value < 0 || !operand_info(x_value, identity(), &x)) return false;
    if (x.dims != identity()) return refuse(op.target + " reads a value of another shape");
    int level = x.level;
    std::string weight, bias;
    if (!channel_argument(op, 1, "weight", &weight, &level) ||
        !channel_argument(op, 2, "bias", &bias, &level)) {
      return false;
    }
    const double eps =
        argument(op, 7, "eps").is_number() ? argument(op, 7, "eps").get<double>() : 1e-5;
    if (!x.per_element)
      return refuse(op.target + " reads a value that does not run along the rows");
    const auto [mean, var] = moments(x, 0);
    level = std::max(level, x.level + 1);
    std::string scaled =
        "(" + x.variable + " - " + mean + ") * (1.0f / sqrtf(" + var + " + " + literal(eps) + "))";
    if (!weight.empty()) scaled = "(" + scaled + ") * " + weight;
    if (!bias.empty()) scaled = "(" + scaled + ") + " + bias;
    if (!is_float_dtype(dtype_of(op))) return refuse(op.target + " makes " + dtype_of(op));
    Info result;
    result.per_element = true;
    result.level = level;
    result.dims = identity();
    result.exact = false;  // from the row's statistics: float32 until it is stored
    result.variable = emit(true, level, scaled);
    known_[op.value] = result;
    p_.ops.push_back(op.name);
    return true;
  }

  bool plan_normalization(const Op& op) {
    if (op.name == "instance_norm") return plan_instance_norm(op);
    if (op.name != "layer_norm" && op.name != "rms_norm") {
      return refuse(op.target + " is a normalisation the row kernel does not write");
    }
    Info x;
    if (!full_operand(op, &x)) return false;
    const json& shape = argument(op, 1, "normalized_shape");
    int n = shape.is_array() ? static_cast<int>(shape.size()) : 0;
    if (p_.rank - n != p_.first_reduced || p_.last_reduced != p_.rank - 1) {
      return refuse(op.target + " normalises other dims than the plan's rows");
    }
    const std::vector<int> all = identity();
    const std::vector<int> last_dims(all.end() - n, all.end());
    auto affine = [&](std::size_t index, const char* name, std::string* variable) {
      int value = ref(argument(op, index, name));
      if (value < 0) return true;
      Info w;
      if (!operand_info(value, last_dims, &w)) return false;
      if (w.dims != last_dims) return refuse(op.target + "'s " + name + " is not per element");
      *variable = w.variable;
      return true;
    };
    std::string weight, bias, scaled;
    const int l = x.level;
    if (op.name == "layer_norm") {
      if (!affine(2, "weight", &weight) || !affine(3, "bias", &bias)) return false;
      double eps = argument(op, 4, "eps").is_number() ? argument(op, 4, "eps").get<double>() : 1e-5;
      auto [mean, var] = moments(x, 0);
      std::string inv = emit(false, l + 1, "1.0f / sqrtf(" + var + " + " + literal(eps) + ")");
      scaled = "(" + x.variable + " - " + mean + ") * " + inv;
    } else {
      if (!affine(2, "weight", &weight)) return false;
      const json& e = argument(op, 3, "eps");
      // torch's default: the machine epsilon of the input's dtype.
      const std::string dtype = dtype_of(op);
      double eps = e.is_number()         ? e.get<double>()
                   : dtype == "bfloat16" ? 0.0078125
                   : dtype == "float16"  ? 0.0009765625
                                         : 1.1920928955078125e-07;
      std::string ss = accumulate("sum", emit(true, l, x.variable + " * " + x.variable), l + 1);
      std::string inv =
          emit(false, l + 1, "1.0f / sqrtf(" + ss + " / (float)R + " + literal(eps) + ")");
      scaled = x.variable + " * " + inv;
    }
    if (!weight.empty()) scaled = "(" + scaled + ") * " + weight;
    if (!bias.empty()) scaled = "(" + scaled + ") + " + bias;
    Info result;
    result.per_element = true;
    result.level = l + 1;
    result.dims = identity();
    if (!is_float_dtype(dtype_of(op))) return refuse(op.target + " makes " + dtype_of(op));
    result.exact = false;  // from the row's statistics: float32 until it is stored
    result.variable = emit(true, result.level, scaled);
    known_[op.value] = result;
    p_.ops.push_back(op.name);
    return true;
  }

  bool plan_layout(const Op& op) {
    const std::string& n = op.name;
    int source = op.inputs.empty() ? -1 : op.inputs[0];
    if (n == "getitem") {
      auto it = known_.find(source);
      const json& index = argument(op, 1, "index");
      if (it == known_.end() || it->second.elements.empty() || !index.is_number_integer() ||
          index.get<int>() < 0 || index.get<std::size_t>() >= it->second.elements.size()) {
        return refuse(op.target + " of a value that is not a reduction's (values, indices)");
      }
      known_[op.value] = it->second.elements[index.get<std::size_t>()];
      return true;
    }
    if (n == "expand" || n == "expand_as" || n == "contiguous" || n == "clone" || n == "alias" ||
        n == "detach") {
      const TensorType* in = source >= 0 ? tensor_of(source) : nullptr;
      const TensorType* out = tensor_of(op.value);
      auto it = known_.find(source);
      if (!in || !out || it == known_.end() || in->shape.size() != out->shape.size()) {
        return refuse(op.target + " of a value the plan has not made, or to another rank");
      }
      known_[op.value] = it->second;  // broadcasting is implicit in the kernel
      return true;
    }
    if (n == "squeeze") {  // a per-row value kept as (..., 1, ...) losing the reduced dims
      auto it = known_.find(source);
      const TensorType* out = tensor_of(op.value);
      std::vector<std::int64_t> rows;
      for (int d : without_d()) rows.push_back(f_[d]);
      if (it == known_.end() || it->second.per_element || !it->second.keepdim ||
          !it->second.elements.empty() || !out || out->shape != rows) {
        return refuse(op.target + " of a value that is not one a row, kept along the rows");
      }
      Info result = it->second;
      result.keepdim = false;
      result.dims = without_d();
      known_[op.value] = result;
      return true;
    }
    return refuse(op.target + " moves data in a way the row kernel does not");
  }

  void plan_outputs() {
    for (int value : graph_.outputs) {
      auto it = known_.find(value);
      if (it == known_.end() || graph_.values[value].kind != "op" || !it->second.elements.empty()) {
        problems_.push_back("output " + graph_.values[value].name +
                            " is not a value the plan made");
        continue;
      }
      const Info& info = it->second;
      if (info.per_element && info.dims != identity()) {
        problems_.push_back("output " + graph_.values[value].name + " is not of the rows' shape");
        continue;
      }
      const auto& results = graph_.values[value].results;
      std::string dtype = info.index ? "int64" : results.empty() ? "" : results[0].dtype;
      if (!info.index && !is_float_dtype(dtype)) {
        problems_.push_back("output " + graph_.values[value].name + " is " + dtype);
        continue;
      }
      p_.outputs.push_back(
          {value, info.per_element, info.keepdim, info.index, info.variable, dtype});
    }
    if (p_.outputs.empty() && problems_.empty()) problems_.push_back("it returns nothing");
  }

  const Graph& graph_;
  RowPlan p_;
  std::vector<std::int64_t> f_;
  std::map<int, Info> known_;
  std::vector<std::string> problems_;
  int next_ = 0;
};

}  // namespace

Status plan_rows(const Graph& graph, RowPlan* plan) { return Planner(graph).plan(plan); }

}  // namespace cuda_agent::synth

namespace cuda_agent::synth {
namespace {

std::string n(std::size_t k) { return std::to_string(k); }

/// The lines of one kind computable at a point: per element with level <= max_level, or per row
/// with level == max_level.
std::string lines_at(const RowPlan& plan, bool per_element, int level, const char* indent) {
  std::string s;
  for (const RowLine& line : plan.lines) {
    if (line.per_element != per_element) continue;
    if (per_element ? line.level <= level : line.level == level) s += indent + line.text + "\n";
  }
  return s;
}

/// Loads of the per-element inputs at element k of the row.
std::string loads(const RowPlan& plan, const char* indent) {
  std::string s;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (!plan.inputs[k].per_element) continue;
    const std::string in = "in" + n(k);
    const std::string at =
        plan.inputs[k].segmented ? "sa_index(k, " + in + "_div_r, " + in + "_mod_r)" : "k";
    s += indent + std::string("const float ") + in + " = sa_load(b" + n(k) + "[" + at +
         " * SA_STEP(" + in + "_step)]);\n";
  }
  return s;
}

std::string initial(const std::string& kind) {
  if (kind == "sum" || kind == "moments") return "0.0f";
  if (kind == "max" || kind == "argmax" || kind == "lse") return "-INFINITY";
  return "INFINITY";
}

std::string update(const RowAccumulator& a) {
  if (a.kind == "sum") return a.name + " += " + a.operand + ";";
  if (a.kind == "max") return a.name + " = sa_max(" + a.name + ", " + a.operand + ");";
  if (a.kind == "min") return a.name + " = sa_min(" + a.name + ", " + a.operand + ");";
  if (a.kind == "lse") return "sa_lse(" + a.name + ", " + a.name + "_s, " + a.operand + ");";
  if (a.kind == "moments") {
    return "sa_moment(" + a.name + ", " + a.name + "_n, " + a.name + "_s, " + a.name + "_m2, " +
           a.operand + ");";
  }
  return "sa_" + a.kind + "(" + a.name + ", " + a.name + "_i, " + a.operand + ", k);";
}

const char* kArgHelpers =
    "// (v, i) takes (v2, i2) when v2 is the greater (argmax) or smaller (argmin), NaN counting\n"
    "// as beyond every number and ties going to the lower index, as torch does.\n"
    "SA_FN void sa_argmax(float& v, int64_t& i, float v2, int64_t i2) {\n"
    "  const bool take = v2 != v2 ? (v == v || i2 < i) : (v == v && (v2 > v || (v2 == v && i2 < "
    "i)));\n"
    "  if (take) { v = v2; i = i2; }\n}\n"
    "// (m, s): the running maximum and the sum of exp(x - m); -inf adds nothing, NaN spreads.\n"
    "SA_FN void sa_lse(float& m, float& s, float x) {\n"
    "  if (x > m) { s = s * sa_exp_shifted(m - x) + 1.0f; m = x; }\n"
    "  else if (x == x && x != -INFINITY) s += sa_exp_shifted(x - m);\n"
    "  else if (x != x) { m = x; s = x; }\n}\n"
    "SA_FN void sa_lse_merge(float& m, float& s, float m2, float s2) {\n"
    "  if (m != m || s2 != s2) { m = m != m ? m : m2; s = m; return; }\n"
    "  const float top = m > m2 ? m : m2;\n"
    "  if (top == -INFINITY) return;\n"
    "  s = s * sa_exp_shifted(m - top) + s2 * sa_exp_shifted(m2 - top);\n"
    "  m = top;\n}\n"
    "SA_FN void sa_argmin(float& v, int64_t& i, float v2, int64_t i2) {\n"
    "  const bool take = v2 != v2 ? (v == v || i2 < i) : (v == v && (v2 < v || (v2 == v && i2 < "
    "i)));\n"
    "  if (take) { v = v2; i = i2; }\n}\n"
    "// (k, n, s, m2): a shift (the first element met), the count, and the sums of the elements'\n"
    "// deviations from the shift and of their squares; sa_moments_end leaves the mean in k and\n"
    "// the sum of squared deviations from it in m2.\n"
    "SA_FN void sa_moment(float& k, float& n, float& s, float& m2, float x) {\n"
    "  if (n == 0.0f) k = x;\n"
    "  const float d = x - k;\n"
    "  n += 1.0f;\n  s += d;\n  m2 += d * d;\n}\n"
    "SA_FN void sa_moments_end(float& k, float n, float s, float& m2) {\n"
    "  if (n == 0.0f) return;\n"
    "  const float mean = s / n;\n"
    "  k += mean;\n"
    "  m2 -= s * mean;\n"
    "  if (m2 < 0.0f) m2 = 0.0f;  // rounding; a NaN stays\n}\n";

/// The quad walk's read of element k of four neighbouring rows: one 16-byte load (8 for 16-bit
/// types) where they run along the rows, else one element, the same for all four.
const char* kLanesHelper =
    "template <class T> SA_FN void sa_lanes4(const T* p, bool lanes, float* v) {\n"
    "  if (lanes) {\n    sa_load4(p, v);\n    return;\n  }\n"
    "  v[0] = v[1] = v[2] = v[3] = sa_load(p[0]);\n}\n";

/// Block-wide combination of each thread's partial result for its row (CUDA), as one template
/// over the partial's type (a float; a value and its index; a maximum and its sum of
/// exponentials) and the function that merges two partials.
const char* kCudaCombine = R"(
struct sa_vi { float v; int64_t i; };  // a value and its index (argmax, argmin)
struct sa_ms { float m; float s; };    // a running maximum and the sum of exp(x - m)
struct sa_mv { float n, mean, m2; };   // a count, its mean and its sum of squared deviations
SA_FN float sa_shfl(float x, int o) { return __shfl_xor_sync(0xffffffffu, x, o); }
SA_FN sa_vi sa_shfl(sa_vi x, int o) {
  return {sa_shfl(x.v, o), (int64_t)__shfl_xor_sync(0xffffffffu, (long long)x.i, o)};
}
SA_FN sa_ms sa_shfl(sa_ms x, int o) { return {sa_shfl(x.m, o), sa_shfl(x.s, o)}; }
SA_FN sa_mv sa_shfl(sa_mv x, int o) { return {sa_shfl(x.n, o), sa_shfl(x.mean, o), sa_shfl(x.m2, o)}; }
struct sa_add_of { __device__ float operator()(float a, float b) const { return a + b; } };
struct sa_max_of { __device__ float operator()(float a, float b) const { return sa_max(a, b); } };
struct sa_min_of { __device__ float operator()(float a, float b) const { return sa_min(a, b); } };
struct sa_argmax_of {
  __device__ sa_vi operator()(sa_vi a, sa_vi b) const { sa_argmax(a.v, a.i, b.v, b.i); return a; }
};
struct sa_argmin_of {
  __device__ sa_vi operator()(sa_vi a, sa_vi b) const { sa_argmin(a.v, a.i, b.v, b.i); return a; }
};
struct sa_lse_of {
  __device__ sa_ms operator()(sa_ms a, sa_ms b) const { sa_lse_merge(a.m, a.s, b.m, b.s); return a; }
};
struct sa_moments_of {  // two parts' moments as one's (Chan, Golub and LeVeque)
  __device__ sa_mv operator()(sa_mv a, sa_mv b) const {
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    const float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
    return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
  }
};

// Every thread of a row gets the merge of the partials of the row's TY threads. LANES: a row's
// threads are consecutive lanes (TY a multiple of 32, or TY == 32 with TX rows a block), which
// merge by shuffles and then, past one warp, through one slot per warp (TX == 1). Else the
// block's TX rows lie side by side (tx = threadIdx.x % TX) and merge as a tree in shared
// memory. red holds TX == 1 ? 32 : TX * TY partials.
template <int TX, int TY, bool LANES, class T, class F>
SA_FN T sa_combine(T v, T* red, int tx, int ty, F merge) {
  if (TY == 1) return v;
  if (LANES) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = merge(v, sa_shfl(v, o));
    if (TY == 32) return v;
    __syncthreads();  // the previous combination's readers are done with red
    if ((ty & 31) == 0) red[ty >> 5] = v;
    __syncthreads();
    v = red[0];
#pragma unroll
    for (int w = 1; w < TY / 32; ++w) v = merge(v, red[w]);
    return v;
  }
  __syncthreads();
  red[ty * TX + tx] = v;
  __syncthreads();
#pragma unroll
  for (int s = TY / 2; s > 0; s >>= 1) {
    if (ty < s) red[ty * TX + tx] = merge(red[ty * TX + tx], red[(ty + s) * TX + tx]);
    __syncthreads();
  }
  return red[tx];
}
)";

/// The 4-at-a-time walks' helpers: a quotient in 32 bits where it fits (where a segmented
/// input's next value starts), a run of 4 kept in and taken from shared memory, and the
/// combination of a row's partial results over the blocks of its cluster (after each block's
/// own), the same merges in the same order in every block. Clusters need sm_90.
const char* kWalkHelpers = R"(
SA_FN int64_t sa_quot(int64_t x, int64_t d) {
  return ((x | d) >> 31) == 0 ? (int64_t)((uint32_t)x / (uint32_t)d) : x / d;
}
SA_FN void sa_keep4(float* p, const float* v) { *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]); }
SA_FN void sa_take4(const float* p, float* v) {
  const float4 t = *reinterpret_cast<const float4*>(p);
  v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
}
template <int TX, int TY, bool LANES, class T, class F>
SA_FN T sa_cluster_combine(T v, T* red, int tx, int ty, F merge) {
  v = sa_combine<TX, TY, LANES>(v, red, tx, ty, merge);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ T part;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) part = v;
  cluster.sync();
  T r = *cluster.map_shared_rank(&part, 0);
  for (unsigned b = 1; b < cluster.num_blocks(); ++b) r = merge(r, *cluster.map_shared_rank(&part, b));
  cluster.sync();  // every block has read the parts before any writes its next
  return r;
#else
  __trap();
  return v;
#endif
}
)";

/// How the threads of a row walk it.
enum class Walk {
  kCpu,       // one thread, element by element
  kStrided,   // CUDA: TY threads, element k by thread k % TY, at any step
  kCached,    // CUDA, contiguous rows: 4 elements at a time into registers, kept for every pass
  kStreamed,  // CUDA, contiguous rows of any length: 4 elements at a time, read again each pass
  // CUDA, contiguous rows too long for one block's registers: a cluster of CL blocks a row,
  // each a segment of it, 4 elements at a time, kept in its shared memory after the first
  // read; partial results meet across the cluster through distributed shared memory.
  kClustered,
};

/// What a thread does with accumulator a once it has met all its elements: moments become a
/// mean and a sum of squared deviations from it.
std::string finish(const RowAccumulator& a, const char* indent) {
  if (a.kind != "moments") return "";
  return indent + std::string("sa_moments_end(") + a.name + ", " + a.name + "_n, " + a.name +
         "_s, " + a.name + "_m2);\n";
}

/// The combination of accumulator a's partials over the row's threads (CUDA); for "lse", of
/// the maximum (part 1) or the sum of exponentials (part 2) when the walk takes them apart.
std::string combine(const RowAccumulator& a, const char* indent, int part = 0,
                    const std::string& combiner = "sa_combine") {
  const std::string at = std::string(indent);
  const std::string call = combiner + "<TX, TY, LANES>(";
  if (a.kind == "moments") {
    return finish(a, indent) + at + "{\n" + at + "  const sa_mv r = " + call + "sa_mv{" + a.name +
           "_n, " + a.name + ", " + a.name + "_m2}, red_mv, tx, ty, sa_moments_of());\n" + at +
           "  " + a.name + " = r.mean;\n" + at + "  " + a.name + "_m2 = r.m2;\n" + at + "}\n";
  }
  if (a.kind == "lse" && part == 1)
    return at + a.name + " = " + call + a.name + ", red, tx, ty, sa_max_of());\n";
  if (a.kind == "lse" && part == 2) {
    return at + a.name + "_s = " + call + a.name + "_s, red, tx, ty, sa_add_of());\n";
  }
  if (a.kind == "lse") {
    return at + "{\n" + at + "  const sa_ms r = " + call + "sa_ms{" + a.name + ", " + a.name +
           "_s}, red_ms, tx, ty, sa_lse_of());\n" + at + "  " + a.name + " = r.m;\n" + at + "  " +
           a.name + "_s = r.s;\n" + at + "}\n";
  }
  if (a.kind == "argmax" || a.kind == "argmin") {
    return at + "{\n" + at + "  const sa_vi r = " + call + "sa_vi{" + a.name + ", " + a.name +
           "_i}, red_vi, tx, ty, sa_" + a.kind + "_of());\n" + at + "  " + a.name + " = r.v;\n" +
           at + "  " + a.name + "_i = r.i;\n" + at + "}\n";
  }
  const std::string merge = a.kind == "sum" ? "sa_add_of()" : "sa_" + a.kind + "_of()";
  return at + a.name + " = " + call + a.name + ", red, tx, ty, " + merge + ");\n";
}

/// How many inputs the clustered walk keeps in shared memory: those read 4 at a time that vary
/// from row to row (the others, the same for every row, stay in the L2 cache).
int kept_inputs(const RowPlan& plan) {
  int kept = 0;
  for (const RowInput& in : plan.inputs) kept += in.per_element && !in.segmented && in.per_row;
  return kept;
}

/// The cached walk's value of segmented input k for the run of RW elements from k0 (RW | div_r:
/// one value), as an expression ending its statement; its rows, of at most 32768 elements, take
/// 32-bit arithmetic.
std::string segment_load(std::size_t k) {
  const std::string in = "in" + n(k);
  return "sa_load(b" + n(k) + "[sa_index32((uint32_t)k0, (uint32_t)" + in + "_div_r, (uint32_t)" +
         in + "_mod_r) * " + in + "_step]);\n";
}

/// The cached walk's loop over a thread's elements (in increasing k): per run of RW (from k0),
/// `before`, then for each element, with each per-element input's value and the per-element
/// lines up to `level` in scope, `body`, then `after`.
std::string cached_loop(const RowPlan& plan, int level, const std::string& body,
                        const std::string& before = "", const std::string& after = "") {
  std::string segments, loads;  // a segmented input's value, once a run
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].segmented) {
      segments += "      const float s" + n(k) + " = " + segment_load(k);
      loads += "        const float in" + n(k) + " = s" + n(k) + ";\n";
    } else if (plan.inputs[k].per_element) {
      loads += "        const float in" + n(k) + " = c" + n(k) + "[RW * j + q];\n";
    }
  }
  return "    #pragma unroll\n"
         "    for (int j = 0; j < NV; ++j) {\n"
         "      const int k0 = (j * TY + ty) * RW;\n"
         "      if (!live || k0 >= R) continue;\n" +
         segments + before +
         "#pragma unroll\n"
         "      for (int q = 0; q < RW; ++q) {\n"
         "        const int64_t k = k0 + q;\n" +
         loads + lines_at(plan, true, level, "        ") + body + "      }\n" + after + "    }\n";
}

/// The declarations of accumulator a at its initial value (and its index or sum of
/// exponentials).
std::string declare(const RowAccumulator& a, const char* indent) {
  std::string s = indent + std::string("float ") + a.name + " = " + initial(a.kind) + ";\n";
  if (a.kind == "lse") s += indent + std::string("float ") + a.name + "_s = 0.0f;\n";
  if (a.kind == "moments") {
    s += indent + std::string("float ") + a.name + "_n = 0.0f, " + a.name + "_s = 0.0f, " + a.name +
         "_m2 = 0.0f;\n";
  }
  if (a.kind == "argmax" || a.kind == "argmin")
    s += indent + std::string("int64_t ") + a.name + "_i = INT64_MAX;\n";
  return s;
}

/// Pass `pass` of the cached walk. The row is in registers, so a logsumexp takes its maximum
/// and then its sum of exponentials in two loops (one exp per element, no rescaling), moments
/// the mean and then the squares about it (no shift, no count), and an argmax or argmin, whose
/// thread meets its elements in increasing k, keeps the first best.
std::string cached_pass(const RowPlan& plan, int pass) {
  std::string declarations, first, second, combines, sums;
  for (const RowAccumulator& a : plan.accumulators) {
    if (a.pass != pass) continue;
    declarations += declare(a, "    ");
    const std::string& x = a.operand;
    if (a.kind == "lse") {
      first += "        " + a.name + " = sa_max(" + a.name + ", " + x + ");\n";
      second += "        " + a.name + "_s += " + x + " == " + a.name + " ? 1.0f : sa_exp_shifted(" +
                x + " - " + a.name + ");\n";
      combines += combine(a, "    ", 1);
      sums += combine(a, "    ", 2);
      continue;
    }
    if (a.kind == "moments") {  // the row is at hand: its mean, then the squares about it
      first += "        " + a.name + "_s += " + x + ";\n";
      second += "        {\n          const float d = " + x + " - " + a.name + ";\n          " +
                a.name + "_m2 += d * d;\n        }\n";
      combines += "    " + a.name + " = sa_combine<TX, TY, LANES>(" + a.name +
                  "_s, red, tx, ty, sa_add_of()) / (float)R;\n";
      sums += "    " + a.name + "_m2 = sa_combine<TX, TY, LANES>(" + a.name +
              "_m2, red, tx, ty, sa_add_of());\n";
      continue;
    }
    if (a.kind == "argmax" || a.kind == "argmin") {
      const char* beats = a.kind == "argmax" ? " > " : " < ";
      first += "        if (" + x + beats + a.name + " || (" + x + " != " + x + " && " + a.name +
               " == " + a.name + ")) {\n          " + a.name + " = " + x + ";\n          " +
               a.name + "_i = k;\n        }\n";
    } else {
      first += "        " + update(a) + "\n";
    }
    combines += combine(a, "    ");
  }
  if (declarations.empty()) return "";
  std::string s = "    // pass " + n(pass) + "\n" + declarations +
                  cached_loop(plan, pass - 1, first) + combines;
  if (!second.empty()) s += cached_loop(plan, pass - 1, second) + sums;
  return s;
}

/// The body for one row (o, i), which every thread of the row runs.
std::string row_body(const RowPlan& plan, Walk walk) {
  const bool cuda = walk != Walk::kCpu;
  const char* in2 = "    ";
  std::string row;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    std::string in = "in" + n(k);
    row += in2 + std::string("const ") + element_type(plan.inputs[k].dtype) + "* b" + n(k) + " = " +
           in + "_data + sa_index(o, " + in + "_div_o, " + in + "_mod_o) * " + in +
           "_stride_o + sa_index(i, " + in + "_div_i, " + in + "_mod_i) * " + in + "_stride_i;\n";
    if (!plan.inputs[k].per_element)
      row += in2 + std::string("const float ") + in + " = sa_load(b" + n(k) + "[0]);\n";
  }
  if (walk == Walk::kCached) {
    // The row's share of this thread: NV runs of RW elements, TY * RW apart, all loads issued
    // before any is used.
    std::string cache;
    for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
      if (!plan.inputs[k].per_element || plan.inputs[k].segmented) continue;
      row += in2 + std::string("float c") + n(k) + "[RW * NV] = {};\n";
      cache += "        sa_load_v<RW>(b" + n(k) + " + k0, c" + n(k) + " + RW * j);\n";
    }
    if (!cache.empty()) {
      row += in2 + std::string("#pragma unroll\n") + in2 +
             "for (int j = 0; j < NV; ++j) {\n"
             "      const int k0 = (j * TY + ty) * RW;\n"
             "      if (live && k0 < R) {\n" +
             cache + "      }\n" + in2 + "}\n";
    }
    row += lines_at(plan, false, 0, in2);
    for (int pass = 1; pass <= plan.passes; ++pass)
      row += cached_pass(plan, pass) + lines_at(plan, false, pass, in2);
    // Each run of RW is computed into r<j> and stored at once.
    std::string results, writes, stores;
    for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
      if (!plan.outputs[j].per_element) continue;
      results += "      float r" + n(j) + "[RW];\n";
      writes += "        r" + n(j) + "[q] = " + plan.outputs[j].variable + ";\n";
      stores += "      sa_store_v<RW>(out" + n(j) + " + o * R + k0, r" + n(j) + ");\n";
    }
    if (!writes.empty()) {
      row += in2 + std::string("// the outputs\n") +
             cached_loop(plan, plan.passes, writes, results, stores);
    }
  } else {
    row += lines_at(plan, false, 0, in2);
    // The loop over the thread's elements: its head, the per-element inputs' values at k, and
    // its end. A streamed walk's head reads 4 elements of each input at once, and a run loop
    // inside it takes them in turn.
    // A clustered walk's first loop reads the block's segment [lo, hi) and keeps it in shared
    // memory (held input h at kept + h * seg), where each thread's later loops find its own
    // elements again.
    const bool fours = walk == Walk::kStreamed || walk == Walk::kClustered;
    const std::string combiner = walk == Walk::kClustered ? "sa_cluster_combine" : "sa_combine";
    std::string run, run_end, element_loads;
    const auto head_of = [&](bool first) -> std::string {
      if (!fours) {
        return walk == Walk::kCpu
                   ? "for (int64_t k = 0; k < R; ++k) {\n"
                   : "#pragma unroll 8\n    for (int64_t k = ty; live && k < R; k += TY) {\n";
      }
      // A segmented input's value holds for a run of div_r elements: each thread finds where
      // the run it is in starts in the input (s<k>_at) and where the run ends (s<k>_end), the
      // division done again only past that end.
      std::string runs, body;
      int kept_index = 0;  // among the inputs the clustered walk keeps
      for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
        if (!plan.inputs[k].per_element) continue;
        if (plan.inputs[k].segmented) {
          const std::string in = "in" + n(k), at = "s" + n(k) + "_at", end = "s" + n(k) + "_end";
          runs += ", " + end + " = 0, " + at + " = 0";
          body += "      if (k0 >= " + end + ") {\n        const int64_t r = sa_quot(k0, " + in +
                  "_div_r);\n        " + at + " = sa_index(r, 1, " + in + "_mod_r) * " + in +
                  "_step;\n        " + end + " = (r + 1) * " + in + "_div_r;\n      }\n" +
                  "      const float c" + n(k) + " = sa_load(b" + n(k) + "[" + at + "]);\n";
          continue;
        }
        const bool keep = walk == Walk::kClustered && plan.inputs[k].per_row;
        const std::string kept = keep ? "kept + " + n(kept_index++) + " * seg + (k0 - lo)" : "";
        body += "      float c" + n(k) + "[4];\n";
        if (keep && !first) {
          body += "      sa_take4(" + kept + ", c" + n(k) + ");\n";
          continue;
        }
        body += "      sa_load4(b" + n(k) + " + k0, c" + n(k) + ");\n";
        if (keep) body += "      sa_keep4(" + kept + ", c" + n(k) + ");\n";
      }
      return (walk == Walk::kStreamed
                  ? "#pragma unroll 4\n    for (int64_t k0 = (int64_t)ty * 4" + runs +
                        "; k0 < R; k0 += TY * 4) {\n"
                  : "#pragma unroll 4\n    for (int64_t k0 = lo + (int64_t)ty * 4" + runs +
                        "; k0 < hi; k0 += TY * 4) {\n") +
             body;
    };
    if (fours) {
      for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
        if (!plan.inputs[k].per_element) continue;
        element_loads += "        const float in" + n(k) + " = c" + n(k) +
                         (plan.inputs[k].segmented ? ";\n" : "[q];\n");
      }
      run =
          "#pragma unroll\n      for (int q = 0; q < 4; ++q) {\n        const int64_t k = k0 + "
          "q;\n";
      run_end = "      }\n";
    } else {
      element_loads = loads(plan, "      ");
    }
    const std::string end = in2 + std::string("}\n");
    for (int pass = 1; pass <= plan.passes; ++pass) {
      std::string declarations, updates, combines, sums;
      bool only_sums = true;
      for (const RowAccumulator& a : plan.accumulators) {
        if (a.pass != pass) continue;
        declarations += declare(a, in2);
        combines += cuda ? combine(a, in2, 0, combiner) : finish(a, in2);
        updates += "      " + update(a) + "\n";
        only_sums = only_sums && a.kind == "sum";
        sums += (sums.empty() ? "" : ", ") + a.name;
      }
      if (declarations.empty()) continue;
      // On the CPU a pass whose accumulators are all sums vectorises as an OpenMP reduction.
      std::string simd = !cuda && only_sums
                             ? in2 + std::string("#pragma omp simd reduction(+ : ") + sums + ")\n"
                             : "";
      row += in2 + std::string("// pass ") + n(pass) + "\n" + declarations + simd + in2 +
             head_of(pass == 1) + run + element_loads + lines_at(plan, true, pass - 1, "      ") +
             updates + run_end + end + combines + lines_at(plan, false, pass, in2);
    }
    // The outputs, element by element; a streamed walk's 4 at a time, as read.
    std::string element_writes, results, stores;
    for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
      const RowOutput& out = plan.outputs[j];
      if (!out.per_element) continue;
      if (fours) {
        results += "      float r" + n(j) + "[4];\n";
        element_writes += "        r" + n(j) + "[q] = " + out.variable + ";\n";
        stores += "      sa_store4(out" + n(j) + " + o * R + k0, r" + n(j) + ");\n";
      } else {
        element_writes +=
            "      sa_store(&out" + n(j) + "[(o * R + k) * I + i], " + out.variable + ");\n";
      }
    }
    if (!element_writes.empty()) {
      row += in2 + std::string("// the outputs\n") + in2 + head_of(plan.passes == 0) + results +
             run + element_loads + lines_at(plan, true, plan.passes, "      ") + element_writes +
             run_end + stores + end;
    }
  }
  for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
    const RowOutput& out = plan.outputs[j];
    if (!out.per_element) {
      const char* writer = walk == Walk::kClustered ? "if (ty == 0 && rank == 0) "
                           : cuda                   ? "if (live && ty == 0) "
                                                    : "";
      row += in2 + std::string(writer) + "sa_store(&out" + n(j) + "[row], " + out.variable + ");\n";
    }
  }
  return row;
}

/// Whether text names variable `name` (as a whole identifier).
bool mentions(const std::string& text, const std::string& name) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    if ((at == 0 || !word(text[at - 1])) && (end == text.size() || !word(text[end]))) return true;
  }
  return false;
}

/// The quad walk's per-row values, each held per lane as <name>_[4]: the per-row inputs, the
/// accumulators (and their sums of exponentials or indices) and the per-row lines.
struct LaneValue {
  std::string name, type;
  std::string initial;  // an accumulator's start, bound by reference (a lane's loop updates it)
  int level = -1;       // a per-row line: computed after this pass; else always in scope
};

std::vector<LaneValue> lane_values(const RowPlan& plan) {
  std::vector<LaneValue> values;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (!plan.inputs[k].per_element) values.push_back({"in" + n(k), "float", ""});
  }
  for (const RowAccumulator& a : plan.accumulators) {
    values.push_back({a.name, "float", initial(a.kind)});
    if (a.kind == "lse") values.push_back({a.name + "_s", "float", "0.0f"});
    if (a.kind == "moments") {
      for (const char* part : {"_n", "_s", "_m2"})
        values.push_back({a.name + part, "float", "0.0f"});
    }
    if (a.kind == "argmax" || a.kind == "argmin")
      values.push_back({a.name + "_i", "int64_t", "INT64_MAX"});
  }
  for (const RowLine& line : plan.lines) {
    if (!line.per_element) values.push_back({line.name, line.type, "", line.level});
  }
  return values;
}

/// A lane's loop (q = 0..3) over body, with the per-row values body names that are in scope
/// after pass `level` bound to the lane's copies.
std::string lane_loop(const std::vector<LaneValue>& values, int level, const std::string& body,
                      const char* indent) {
  const std::string at(indent);
  std::string bind;
  for (const LaneValue& v : values) {
    if (v.level > level || !mentions(body, v.name)) continue;
    bind += at + "  " + (v.initial.empty() ? "const " + v.type + " " : v.type + "& ") + v.name +
            " = " + v.name + "_[q];\n";
  }
  return at + "#pragma unroll\n" + at + "for (int q = 0; q < 4; ++q) {\n" + bind + body + at +
         "}\n";
}

/// The body of the quad walk for a thread's four neighbouring rows (o, i0..i0 + 3), which every
/// thread of them runs: element k of the four is one 16-byte load of each input that runs along
/// them (or one element for an input the same for all four), and each op is computed per lane.
std::string quad_body(const RowPlan& plan) {
  const char* in2 = "    ";
  const std::vector<LaneValue> values = lane_values(plan);
  std::string row, starts;
  for (const LaneValue& v : values) {
    row += in2 + v.type + " " + v.name + "_[4];\n";
    if (!v.initial.empty()) starts += "      " + v.name + "_[q] = " + v.initial + ";\n";
  }
  if (!starts.empty()) row += lane_loop({}, 0, starts, in2);
  std::string element_loads, per_row_loads;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    const std::string in = "in" + n(k);
    const std::string outer =
        in + "_data + sa_index(o, " + in + "_div_o, " + in + "_mod_o) * " + in + "_stride_o";
    if (!plan.inputs[k].per_element) {
      per_row_loads += "      " + in + "_[q] = sa_load((" + outer + ")[sa_index(i0 + q, " + in +
                       "_div_i, " + in + "_mod_i) * " + in + "_stride_i]);\n";
      continue;
    }
    // Four elements i0.. apart by one (the launcher saw to it), or the same element for all.
    row += in2 + std::string("const ") + element_type(plan.inputs[k].dtype) + "* b" + n(k) + " = " +
           outer + " + sa_index(i0, " + in + "_div_i, " + in + "_mod_i) * " + in + "_stride_i;\n" +
           in2 + "const bool l" + n(k) + " = " + in + "_mod_i != 1 && " + in + "_div_i % 4 != 0;\n";
    element_loads += "      float c" + n(k) + "[4];\n      sa_lanes4(b" + n(k) + " + k * " + in +
                     "_step, l" + n(k) + ", c" + n(k) + ");\n";
  }
  if (!per_row_loads.empty()) row += lane_loop({}, 0, per_row_loads, in2);
  std::string lane_inputs;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].per_element)
      lane_inputs += "        const float in" + n(k) + " = c" + n(k) + "[q];\n";
  }
  // The per-row lines after pass `level`, each kept per lane.
  const auto row_lines = [&](int level) {
    std::string body;
    for (const RowLine& line : plan.lines) {
      if (line.per_element || line.level != level) continue;
      body += "      " + line.text + "\n      " + line.name + "_[q] = " + line.name + ";\n";
    }
    return body.empty() ? "" : lane_loop(values, level - 1, body, in2);
  };
  const std::string head = "#pragma unroll 4\n    for (int64_t k = ty; live && k < R; k += TY) {\n";
  row += row_lines(0);
  for (int pass = 1; pass <= plan.passes; ++pass) {
    std::string updates, combines;
    for (const RowAccumulator& a : plan.accumulators) {
      if (a.pass != pass) continue;
      updates += "        " + update(a) + "\n";
      combines += combine(a, "      ");
    }
    if (updates.empty()) continue;
    row += in2 + std::string("// pass ") + n(pass) + "\n" + in2 + head + element_loads +
           lane_loop(values, pass - 1,
                     lane_inputs + lines_at(plan, true, pass - 1, "        ") + updates, "      ") +
           in2 + "}\n" + lane_loop(values, pass, combines, in2) + row_lines(pass);
  }
  std::string results, writes, stores;
  for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
    const RowOutput& out = plan.outputs[j];
    if (!out.per_element) continue;
    results += "      float r" + n(j) + "[4];\n";
    writes += "        r" + n(j) + "[q] = " + out.variable + ";\n";
    stores += "      sa_store4(out" + n(j) + " + (o * R + k) * I + i0, r" + n(j) + ");\n";
  }
  if (!writes.empty()) {
    row +=
        in2 + std::string("// the outputs\n") + in2 + head + element_loads + results +
        lane_loop(values, plan.passes,
                  lane_inputs + lines_at(plan, true, plan.passes, "        ") + writes, "      ") +
        stores + in2 + "}\n";
  }
  std::string row_writes;
  for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
    const RowOutput& out = plan.outputs[j];
    if (!out.per_element)
      row_writes += "        sa_store(&out" + n(j) + "[row + q], " + out.variable + ");\n";
  }
  if (!row_writes.empty())
    row += in2 + std::string("if (live && ty == 0) {\n") +
           lane_loop(values, plan.passes, row_writes, "      ") + in2 + "}\n";
  return row;
}

/// The cached walk's block shapes, each for contiguous rows of up to 4 * threads * runs
/// elements. By default the first in this order that covers the row (the fewest threads of at
/// most 4 runs each, then more runs); the tuner tries the next two that cover it too, and the
/// deep shapes after kCachedDeep (fewer threads a row, more runs each, so more rows resident)
/// that cover it without idle threads. Rows of one warp go `rows` to a block.
struct CachedShape {
  int threads, runs, rows;
};
constexpr CachedShape kCachedShapes[] = {{32, 1, 4},   {32, 2, 4},   {32, 4, 4},   {64, 4, 1},
                                         {128, 4, 1},  {256, 4, 1},  {512, 4, 1},  {512, 8, 1},
                                         {1024, 4, 1}, {512, 16, 1}, {1024, 8, 1}, {32, 8, 4},
                                         {64, 16, 1},  {128, 8, 1},  {128, 16, 1}, {256, 8, 1}};
constexpr std::size_t kCachedDeep = 11;
/// Config ids of the wide cached shapes: shape c (of an even number of runs) in half as many
/// runs of 8 elements, the same row reach and registers, so that each load of a 16-bit tensor
/// is a 16-byte vector rather than 8 bytes. Offered to the tuner where every tensor the walk
/// reads or writes along the rows is 16-bit; not a default: on an H100 each was slower than its
/// runs of 4 in the three 16-bit row tasks (bench/README.md).
constexpr int kWideCachedConfig = 500;

/// The strided walk's block shapes a tuner may choose: TX rows side by side, TY threads each.
struct StridedShape {
  int rows, threads;
};
constexpr StridedShape kStridedShapes[] = {{64, 8},  {32, 8},  {128, 4}, {32, 16}, {1, 512},
                                           {1, 256}, {1, 128}, {1, 32},  {256, 2}, {512, 1}};
constexpr int kStridedConfig = 100;  // config ids: cached shapes 0..15, strided 100..109
/// Contiguous rows up to this long are also offered to the tuner a thread a row (the strided
/// shapes of 512 x 1 and 256 x 2 threads), and up to kThreadRowDefaultLength taken so by
/// default: on an H100 a max over rows of 4 (8M rows) took 0.082 ms a thread a row and 2.286 ms
/// a warp a row (the cached walk's narrowest shape), a softmax over rows of 16 (4M rows) 0.856
/// and 1.060 ms (bench/README.md).
constexpr long long kThreadRowMaxLength = 64;
constexpr long long kThreadRowDefaultLength = 16;
constexpr int kThreadRowShape = 9;  // in kStridedShapes: 512 rows x 1 thread

/// The quad walk's block shapes (config ids 300..): TX quads of rows side by side, TY threads
/// each. On an H200 the shapes from 16 x 32 to 256 x 2 summed (96, 2048, 4096) over dim 1
/// within 2% of each other (0.718-0.730 ms), 1.7x the scalar strided walk's 1.25 ms; a row of
/// 16 (a min over 16 channels) took 2.6 ms with 64 x 8 and 10.7 ms with 16 x 32, the threads of
/// a row having 2 elements or none each and the combination costing the rest. So a row's
/// threads are about its length / 16, or one.
constexpr StridedShape kQuadShapes[] = {{64, 8}, {16, 32}, {32, 16}, {128, 4}, {256, 1}, {128, 2}};
constexpr int kQuadConfig = 300;
constexpr long long kQuadMinInner = 16;  // rows fewer apart take the strided walk

/// Whether rows I apart take the quad walk (where the tensors allow it at run time).
bool quad_rows(long long I) { return I % 4 == 0 && I >= kQuadMinInner; }

/// The quad walk's shape by default: the first entry whose bounds the rows meet (R >=
/// min_length, and I < below_inner where that is set), and the two the tuner tries after it.
struct QuadDefault {
  long long min_length, below_inner;
  int shape, next[2];  // in kQuadShapes
};
constexpr QuadDefault kQuadDefaults[] = {
    {512, 256, 1, {2, 0}}, {128, 0, 0, {2, 3}}, {32, 0, 5, {4, 3}}, {0, 0, 4, {5, 3}}};

const QuadDefault& quad_default(long long R, long long I) {
  for (const QuadDefault& d : kQuadDefaults) {
    if (R >= d.min_length && (d.below_inner == 0 || I < d.below_inner)) return d;
  }
  return kQuadDefaults[std::size(kQuadDefaults) - 1];
}

std::string quad_label(const StridedShape& shape) {
  return "quads of rows " + std::to_string(shape.rows) + " x " + std::to_string(shape.threads) +
         " threads";
}

/// The streamed walk's block sizes (a row a block), config ids 200.., and by default the
/// first entry of kStreamedDefaults whose bound the row's length meets.
constexpr int kStreamedThreads[] = {128, 256, 512, 1024};
constexpr int kStreamedConfig = 200;

/// The clustered walk's shapes (config ids 400..): CL blocks a row, TY threads each. By default
/// the first of 256 threads whose segments take at most kClusteredBytes
/// of shared memory a block (three blocks an SM); the tuner tries it and then the others whose
/// segments fit. On an H200, rows of 65536 and 131072 floats (an instance norm, group norms)
/// ran fastest as 8 blocks of 256 threads; 8 x 512 and 4 x 512 took 1.03-1.42x as long, and
/// clusters of 16 blocks (the non-portable size, 128 or 256 threads) 1.12-1.56x
/// (bench/README.md), so the tuner does not try those.
struct ClusteredShape {
  int blocks, threads;
};
constexpr ClusteredShape kClusteredShapes[] = {{8, 256}, {8, 512}, {4, 512}};
constexpr int kClusteredConfig = 400;
constexpr long long kClusteredBytes = 72 * 1024;      // a block's share by default
constexpr long long kClusteredMaxBytes = 200 * 1024;  // of the 227 KB a block may opt into

/// The elements of a row each block of a cluster of `blocks` keeps: a multiple of 4.
long long clustered_segment(long long R, int blocks) {
  return (R + 4LL * blocks - 1) / (4LL * blocks) * 4;
}

/// Whether the launcher may take the shape by default (where its segments fit kClusteredBytes).
bool clustered_by_default(const ClusteredShape& shape) { return shape.threads == 256; }

/// The clustered shape the launcher takes by default for rows of R elements and `kept` inputs
/// kept: the first that may be a default whose segments fit kClusteredBytes; -1 if none.
int clustered_default(long long R, int kept) {
  for (int c = 0; c < static_cast<int>(std::size(kClusteredShapes)); ++c) {
    const ClusteredShape& shape = kClusteredShapes[c];
    if (!clustered_by_default(shape)) continue;
    if (clustered_segment(R, shape.blocks) * 4 * kept <= kClusteredBytes) return c;
  }
  return -1;
}
struct StreamedDefault {
  long long min_length;
  int threads;  // in kStreamedThreads
};
constexpr StreamedDefault kStreamedDefaults[] = {{8192, 2}, {2048, 1}, {0, 0}};

int streamed_default(long long R) {
  for (const StreamedDefault& d : kStreamedDefaults) {
    if (R >= d.min_length) return d.threads;
  }
  return 0;
}

/// The strided walk's shape by default: the first entry whose bounds the rows meet. Rows
/// inner >= 16 apart take two warps over 64 neighbouring rows (256 consecutive bytes a step);
/// other rows, threads by their length.
struct StridedDefault {
  long long min_inner, min_length;
  int shape;  // in kStridedShapes
};
constexpr StridedDefault kStridedDefaults[] = {
    {16, 0, 0}, {0, 4096, 4}, {0, 1024, 5}, {0, 256, 6}, {0, 0, 7}};

int strided_default(long long R, long long I) {
  for (const StridedDefault& d : kStridedDefaults) {
    if (I >= d.min_inner && R >= d.min_length) return d.shape;
  }
  return std::size(kStridedShapes) - 1;
}

/// How many inputs the cached walk holds in registers: those read along the rows, but for the
/// segmented ones (a value a run of 4).
int held_inputs(const RowPlan& plan) {
  int held = 0;
  for (const RowInput& in : plan.inputs) held += in.per_element && !in.segmented ? 1 : 0;
  return held;
}

/// The longest row a cached shape holds.
long long cached_reach(const CachedShape& shape) { return 4LL * shape.threads * shape.runs; }

/// Whether a thread of the shape holds its share of `cached` inputs in registers with room for
/// the rest of the kernel (about 32 registers) under __launch_bounds__(threads).
bool fits_registers(const CachedShape& shape, int cached) {
  const int budget = std::min(255, 65536 / (shape.threads * shape.rows));
  return cached * 4 * shape.runs + 32 <= budget;
}

/// A cached walk's launch configuration, for people.
std::string cached_label(int rows, int threads, int runs, int width) {
  return "rows " + n(rows) + " x " + n(threads) + " threads x " + n(runs) + " runs of " + n(width);
}

/// Whether cached shape c has a wide twin: a block's shape (not a warp's, whose rows are short),
/// not a deep one, of an even number of runs.
bool has_wide_twin(std::size_t c) {
  const CachedShape& shape = kCachedShapes[c];
  return c < kCachedDeep && shape.rows == 1 && shape.runs % 2 == 0;
}

/// Whether every tensor the cached walk reads or writes along the rows (at least one) is 16-bit:
/// where its runs of 8 would read 16 bytes a load.
bool sixteen_bit_rows(const RowPlan& plan) {
  int along = 0;
  for (const RowInput& in : plan.inputs) {
    if (!in.per_element || in.segmented) continue;
    if (!is_16_bit_float(in.dtype)) return false;
    ++along;
  }
  for (const RowOutput& out : plan.outputs) {
    if (!out.per_element) continue;
    if (!is_16_bit_float(out.dtype)) return false;
    ++along;
  }
  return along > 0;
}

/// Whether an input of the plan is read element by element at an index of its own (segmented):
/// the quad walk does not take such a plan.
bool has_segmented(const RowPlan& plan) {
  for (const RowInput& in : plan.inputs) {
    if (in.segmented) return true;
  }
  return false;
}

/// Whether each segmented input of the plan held one value for runs of 4 at capture, so that the
/// walks reading 4 elements at a time take its rows.
bool segments_of_4(const RowPlan& plan) {
  for (const RowInput& in : plan.inputs) {
    if (in.segmented && in.run % 4 != 0) return false;
  }
  return true;
}

}  // namespace

std::string row_kernel_source(const RowPlan& plan, const std::string& device) {
  const bool cuda = device == "cuda";
  std::string params, args;
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    params +=
        "const " + element_type(plan.inputs[k].dtype) + "* __restrict__ in" + n(k) + "_data, ";
    args += "in" + n(k) + "_data, ";
  }
  for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
    params += std::string(plan.outputs[j].index ? "int64_t" : element_type(plan.outputs[j].dtype)) +
              "* __restrict__ out" + n(j) + ", ";
    args += "out" + n(j) + ", ";
  }
  params += "int64_t O, int64_t R, int64_t I";
  args += "O, R, I";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    for (const char* field : {"div_o", "mod_o", "stride_o", "div_i", "mod_i", "stride_i", "step"}) {
      params += ", int64_t in" + n(k) + "_" + field;
      args += ", in" + n(k) + "_" + field;
    }
  }
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (!plan.inputs[k].segmented) continue;
    for (const char* field : {"div_r", "mod_r"}) {
      params += ", int64_t in" + n(k) + "_" + field;
      args += ", in" + n(k) + "_" + field;
    }
  }

  bool has_arg = false, has_lse = false, has_moments = false;
  for (const auto& a : plan.accumulators) {
    has_arg = has_arg || a.kind == "argmax" || a.kind == "argmin";
    has_lse = has_lse || a.kind == "lse";
    has_moments = has_moments || a.kind == "moments";
  }

  std::string source = "// Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                       ", fused: " + n(plan.passes) +
                       " pass(es) over each row, each output written once.\n"
                       "#include <math.h>\n#include <stdint.h>\n";
  if (!cuda) {
    source +=
        "#include <omp.h>\n\n#define SA_FN static inline\n#define SA_STEP(step) (kUnit ? 1 : "
        "(step))\n";
    source +=
        std::string(kExpressionHelpers) + dtype_helpers(device) + kIndexHelper + kArgHelpers + "\n";
    // kUnit: the rows are contiguous (I == 1) and every input read along them has step 1 (a
    // view read in place may not), known at compile time, and the passes vectorise.
    std::string unit = "I == 1";
    for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
      if (plan.inputs[k].per_element) unit += " && in" + n(k) + "_step == 1";
    }
    source += cpu_config_source("fused_rows");
    source += "template <bool kUnit>\nstatic void rows_of(" + params +
              ") {\n"
              "  const int64_t rows = O * I;\n"
              "#pragma omp parallel for schedule(runtime)\n"
              "  for (int64_t row = 0; row < rows; ++row) {\n"
              "    const int64_t o = row / I, i = row % I;\n" +
              row_body(plan, Walk::kCpu) + "  }\n}\n\n";
    source += "extern \"C\" int fused_rows(" + params +
              ", void* /*stream*/) {\n"
              "  sa_apply_config();\n"
              "  if (" +
              unit + ") rows_of<true>(" + args +
              ");\n"
              "  else rows_of<false>(" +
              args +
              ");\n"
              "  return 0;\n}\n";
    return source;
  }

  const std::string shared =
      "  __shared__ float red[TX == 1 ? 32 : TX * TY];\n" +
      std::string(has_arg ? "  __shared__ sa_vi red_vi[TX == 1 ? 32 : TX * TY];\n" : "") +
      std::string(has_lse ? "  __shared__ sa_ms red_ms[TX == 1 ? 32 : TX * TY];\n" : "") +
      std::string(has_moments ? "  __shared__ sa_mv red_mv[TX == 1 ? 32 : TX * TY];\n" : "");
  source +=
      "#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n\n"
      "#define SA_FN static __device__ __forceinline__\n"
      "#define SA_STEP(step) (step)\n";
  source += std::string(kExpressionHelpers) + dtype_helpers(device) + kIndexHelper + kArgHelpers +
            kLanesHelper + kCudaCombine + kWalkHelpers + "\n" + kCudaGridHelper + "\n";
  source +=
      "// Any rows: a block takes TX rows side by side and splits each among TY threads, a row's\n"
      "// element k going to thread k % TY.\n"
      "template <int TX, int TY>\n"
      "static __global__ void __launch_bounds__(TX * TY) fused_rows_strided(" +
      params + ") {\n" + shared + "  constexpr bool LANES = TX == 1;\n" +
      "  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;\n"
      "  const int64_t rows = O * I;\n"
      "  for (int64_t first = (int64_t)blockIdx.x * TX; first < rows; first += "
      "(int64_t)gridDim.x * TX) {\n"
      "    const int64_t row = first + tx;\n"
      "    const bool live = row < rows;\n"
      "    const int64_t o = live ? sa_index(row, I, O) : 0;\n"
      "    const int64_t i = live ? sa_index(row, 1, I) : 0;\n" +
      row_body(plan, Walk::kStrided) + "  }\n}\n\n";
  source +=
      "// Rows inner apart, 4 | I: a thread takes four neighbouring rows (i0..i0 + 3, 16 bytes of\n"
      "// each input that runs along them a step), a block TX such quads side by side, and TY\n"
      "// threads split each, element k going to thread k % TY.\n"
      "template <int TX, int TY>\n"
      "static __global__ void __launch_bounds__(TX * TY) fused_rows_quads(" +
      params + ") {\n" + shared + "  constexpr bool LANES = false;\n" +
      "  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;\n"
      "  const int64_t quads = O * I / 4;\n"
      "  for (int64_t first = (int64_t)blockIdx.x * TX; first < quads; first += "
      "(int64_t)gridDim.x * TX) {\n"
      "    const int64_t row = (first + tx) * 4;\n"
      "    const bool live = first + tx < quads;\n"
      "    const int64_t o = live ? sa_index(row, I, O) : 0;\n"
      "    const int64_t i0 = live ? sa_index(row, 1, I) : 0;\n" +
      quad_body(plan) + "  }\n}\n\n";
  source +=
      "// Contiguous rows (I == 1, RW | R, aligned): a row's TY threads (a block's, or with TY\n"
      "// == 32, a warp's, TX rows to a block) read it RW elements at a time (4, or 8 of a 16-bit\n"
      "// type: 16 bytes), NV runs each, into registers that every pass then reads.\n"
      "template <int TX, int TY, int NV, int RW>\n"
      "static __global__ void __launch_bounds__(TX * TY) fused_rows_cached(" +
      params + ") {\n" + shared +
      "  constexpr bool LANES = true;\n"
      "  const int tx = threadIdx.x / TY, ty = threadIdx.x % TY;\n"
      "  const int64_t i = 0;\n"
      "  for (int64_t first = (int64_t)blockIdx.x * TX; first < O; first += (int64_t)gridDim.x * "
      "TX) {\n"
      "    const int64_t row = first + tx;\n"
      "    const bool live = row < O;\n"
      "    const int64_t o = live ? row : 0;\n" +
      row_body(plan, Walk::kCached) + "  }\n}\n\n";
  source +=
      "// Contiguous rows of any length (I == 1, 4 | R, aligned): a block a row, its TY threads\n"
      "// reading it 4 elements at a time, each pass reading it again.\n"
      "template <int TY>\n"
      "static __global__ void __launch_bounds__(TY) fused_rows_streamed(" +
      params + ") {\n  constexpr int TX = 1;\n" + shared +
      "  constexpr bool LANES = true;\n"
      "  const int tx = 0, ty = threadIdx.x;\n"
      "  const int64_t i = 0;\n"
      "  for (int64_t row = blockIdx.x; row < O; row += gridDim.x) {\n"
      "    const bool live = true;\n"
      "    const int64_t o = row;\n" +
      row_body(plan, Walk::kStreamed) + "  }\n}\n\n";
  const std::string held_count = n(kept_inputs(plan));
  source +=
      "// Contiguous rows too long for a block (I == 1, 4 | R, aligned): CL blocks a row (a\n"
      "// cluster), block r taking the segment [r * seg, (r + 1) * seg) with its TY threads, 4\n"
      "// elements at a time, read once and kept in shared memory for the later passes.\n"
      "template <int CL, int TY>\n"
      "static __global__ void __launch_bounds__(TY) fused_rows_clustered(" +
      params + ") {\n  constexpr int TX = 1;\n" + shared +
      "  extern __shared__ float4 sa_kept[];\n"
      "  float* kept = reinterpret_cast<float*>(sa_kept);  // " +
      held_count +
      " input(s), seg floats each\n"
      "  constexpr bool LANES = true;\n"
      "  const int tx = 0, ty = threadIdx.x;\n"
      "  const int64_t i = 0;\n"
      "  const int rank = (int)(blockIdx.x % CL);\n"
      "  const int64_t seg = (R + 4 * CL - 1) / (4 * CL) * 4;\n"
      "  const int64_t lo = rank * seg, hi = lo + seg < R ? lo + seg : R;\n"
      "  for (int64_t row = blockIdx.x / CL; row < O; row += gridDim.x / CL) {\n"
      "    const bool live = true;\n"
      "    const int64_t o = row;\n" +
      row_body(plan, Walk::kClustered) + "  }\n}\n\n";
  source +=
      "// Whether the device runs clusters (compute capability 9.0 on).\n"
      "static bool sa_clusters() {\n"
      "  static int major = -1;\n"
      "  if (major < 0) {\n"
      "    int device = 0;\n"
      "    if (cudaGetDevice(&device) != cudaSuccess ||\n"
      "        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != "
      "cudaSuccess)\n"
      "      major = 0;\n"
      "  }\n"
      "  return major >= 9;\n}\n\n"
      "// The shared memory a block of a cluster of CL keeps its segment of a row of R in: ceil(R "
      "/\n"
      "// 4CL) runs of 4 floats of each input kept.\n"
      "template <int CL>\n"
      "static size_t sa_segment_bytes(int64_t R) {\n"
      "  return (size_t)((R + 4 * CL - 1) / (4 * CL) * 4) * " +
      held_count +
      " * sizeof(float);\n}\n\n"
      "template <int CL, int TY>\n"
      "static int launch_clustered(" +
      params +
      ", cudaStream_t stream) {\n"
      "  const size_t bytes = sa_segment_bytes<CL>(R);\n"
      "  auto kernel = fused_rows_clustered<CL, TY>;\n"
      "  cudaError_t e = cudaFuncSetAttribute(kernel, "
      "cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);\n"
      "  if (e != cudaSuccess) return (int)e;\n"
      "  const int64_t rows = O < INT32_MAX / CL ? O : INT32_MAX / CL;\n"
      "  cudaLaunchAttribute cluster[1];\n"
      "  cluster[0].id = cudaLaunchAttributeClusterDimension;\n"
      "  cluster[0].val.clusterDim.x = CL;\n"
      "  cluster[0].val.clusterDim.y = 1;\n"
      "  cluster[0].val.clusterDim.z = 1;\n"
      "  cudaLaunchConfig_t config = {};\n"
      "  config.gridDim = dim3((unsigned)(rows * CL));\n"
      "  config.blockDim = dim3(TY);\n"
      "  config.dynamicSmemBytes = bytes;\n"
      "  config.stream = stream;\n"
      "  config.attrs = cluster;\n"
      "  config.numAttrs = 1;\n"
      "  return (int)cudaLaunchKernelEx(&config, kernel, " +
      args + ");\n}\n\n";
  source +=
      "template <int TY>\n"
      "static int launch_streamed(" +
      params +
      ", cudaStream_t stream) {\n"
      "  fused_rows_streamed<TY><<<sa_grid(O), TY, 0, stream>>>(" +
      args +
      ");\n"
      "  return (int)cudaGetLastError();\n}\n\n";
  source +=
      "template <int TX, int TY>\n"
      "static int launch_strided(" +
      params +
      ", cudaStream_t stream) {\n"
      "  const int64_t blocks = (O * I + TX - 1) / TX;\n"
      "  fused_rows_strided<TX, TY><<<sa_grid(blocks), TX * TY, 0, "
      "stream>>>(" +
      args +
      ");\n"
      "  return (int)cudaGetLastError();\n}\n\n"
      "template <int TX, int TY>\n"
      "static int launch_quads(" +
      params +
      ", cudaStream_t stream) {\n"
      "  const int64_t blocks = (O * I / 4 + TX - 1) / TX;\n"
      "  fused_rows_quads<TX, TY><<<sa_grid(blocks), TX * TY, "
      "0, stream>>>(" +
      args +
      ");\n"
      "  return (int)cudaGetLastError();\n}\n\n"
      "template <int TX, int TY, int NV, int RW>\n"
      "static int launch_cached(" +
      params +
      ", cudaStream_t stream) {\n"
      "  const int64_t blocks = (O + TX - 1) / TX;\n"
      "  fused_rows_cached<TX, TY, NV, RW><<<sa_grid(blocks), TX * TY, 0, "
      "stream>>>(" +
      args +
      ");\n"
      "  return (int)cudaGetLastError();\n}\n\n";

  // The cached and streamed walks need every tensor read or written along the rows to be
  // 4-aligned, and each segmented input to hold its value for runs of 4; the cached walk, rows
  // that registers hold. The quad walk reads no segmented input.
  // Runs of 8 (the wide cached shapes) need the same of 8.
  const auto aligned_to = [&](int width) {
    const std::string w = n(width);
    std::string s = "I == 1 && R % " + w + " == 0";
    for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
      if (!plan.inputs[k].per_element) continue;
      if (plan.inputs[k].segmented) {
        s += " && in" + n(k) + "_div_r % " + w + " == 0";
        continue;
      }
      s += " && in" + n(k) + "_step == 1 && in" + n(k) + "_stride_o % " + w +
           " == 0 && sa_aligned<" + w + ">(in" + n(k) + "_data)";
    }
    for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
      if (plan.outputs[j].per_element) s += " && sa_aligned<" + w + ">(out" + n(j) + ")";
    }
    return s;
  };
  const std::string aligned = aligned_to(4);
  const bool wide = sixteen_bit_rows(plan);
  // The quad walk needs each input read along the rows to run along four neighbouring rows
  // (16-byte aligned) or to be the same for all four, and each output written along them to be
  // aligned.
  const bool no_quads = has_segmented(plan);
  std::string quads = no_quads ? "false" : "I % 4 == 0 && I >= " + n(kQuadMinInner);
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    if (!plan.inputs[k].per_element) continue;
    const std::string in = "in" + n(k);
    quads += " &&\n      (" + in + "_mod_i == 1 || " + in + "_div_i % 4 == 0 || (" + in +
             "_div_i == 1 && " + in + "_stride_i == 1 && " + in + "_mod_i % 4 == 0 && " + in +
             "_step % 4 == 0 && " + in + "_stride_o % 4 == 0 && sa_aligned<4>(" + in + "_data)))";
  }
  for (std::size_t j = 0; j < plan.outputs.size(); ++j) {
    if (plan.outputs[j].per_element) quads += " && sa_aligned<4>(out" + n(j) + ")";
  }
  const int held = held_inputs(plan);
  std::string chosen, by_length;
  long long longest = 0;  // the longest row any cached shape holds
  for (std::size_t c = 0; c < std::size(kCachedShapes); ++c) {
    const CachedShape& shape = kCachedShapes[c];
    longest = std::max(longest, cached_reach(shape));
    if (!fits_registers(shape, held)) continue;
    const std::string call = "launch_cached<" + n(shape.rows) + ", " + n(shape.threads) + ", " +
                             n(shape.runs) + ", 4>(" + args + ", s)";
    const std::string reach = n(cached_reach(shape));
    chosen +=
        "    case " + n(c) + ": if (cached && R <= " + reach + ") return " + call + "; break;\n";
    by_length += "    if (R <= " + reach + ") return " + call + ";\n";
    if (wide && has_wide_twin(c)) {  // the same reach and registers in runs of 8
      chosen += "    case " + n(kWideCachedConfig + c) + ": if (cached8 && R <= " + reach +
                ") return launch_cached<" + n(shape.rows) + ", " + n(shape.threads) + ", " +
                n(shape.runs / 2) + ", 8>(" + args + ", s); break;\n";
    }
  }
  std::string streamed_by_length;
  for (std::size_t c = 0; c < std::size(kStreamedThreads); ++c) {
    const std::string call = "launch_streamed<" + n(kStreamedThreads[c]) + ">(" + args + ", s)";
    chosen +=
        "    case " + n(kStreamedConfig + c) + ": if (streamed) return " + call + "; break;\n";
  }
  // The clustered walk: where clusters run and a block's segment fits its shared memory.
  const auto segment_bytes = [&](const ClusteredShape& shape) {
    return "sa_segment_bytes<" + n(shape.blocks) + ">(R) <= ";
  };
  std::string clustered_by_length;
  for (std::size_t c = 0; c < std::size(kClusteredShapes); ++c) {
    const ClusteredShape& shape = kClusteredShapes[c];
    const std::string call =
        "launch_clustered<" + n(shape.blocks) + ", " + n(shape.threads) + ">(" + args + ", s)";
    // A launch the device refuses (a cluster it cannot place, on a MIG slice say) leaves the
    // rows to the streamed walk, its error cleared.
    const std::string tried = "if (" + call + " == 0) return 0;\n      (void)cudaGetLastError();\n";
    chosen += "    case " + n(kClusteredConfig + c) + ": if (clustered && " + segment_bytes(shape) +
              n(kClusteredMaxBytes) + ") {\n      " + tried + "    }\n    break;\n";
    if (!clustered_by_default(shape)) continue;
    clustered_by_length +=
        "    if (" + segment_bytes(shape) + n(kClusteredBytes) + ") {\n      " + tried + "    }\n";
  }
  for (const StreamedDefault& d : kStreamedDefaults) {
    streamed_by_length += "    " + (d.min_length ? "if (R >= " + n(d.min_length) + ") " : "") +
                          "return launch_streamed<" + n(kStreamedThreads[d.threads]) + ">(" + args +
                          ", s);\n";
  }
  for (std::size_t c = 0; c < std::size(kQuadShapes) && !no_quads; ++c) {
    chosen += "    case " + n(kQuadConfig + c) + ": if (quads) return launch_quads<" +
              n(kQuadShapes[c].rows) + ", " + n(kQuadShapes[c].threads) + ">(" + args +
              ", s); break;\n";
  }
  for (std::size_t c = 0; c < std::size(kStridedShapes); ++c) {
    chosen += "    case " + n(kStridedConfig + c) + ": return launch_strided<" +
              n(kStridedShapes[c].rows) + ", " + n(kStridedShapes[c].threads) + ">(" + args +
              ", s);\n";
  }
  source +=
      "// The block shape model_new.py chose (a config id), or -1: by the rows' length.\n"
      "static int sa_config = -1;\n"
      "extern \"C\" int fused_rows_config(int64_t config) {\n"
      "  sa_config = (int)config;\n"
      "  return 0;\n}\n\n";
  source += "extern \"C\" int fused_rows(" + params +
            ", void* stream) {\n"
            "  if (O * I == 0) return 0;\n"
            "  cudaStream_t s = (cudaStream_t)stream;\n"
            "  const bool streamed = " +
            aligned +
            ";\n"
            "  const bool cached = streamed && R <= " +
            n(longest) + ";\n" +
            (wide ? "  const bool cached8 = cached && " + aligned_to(8) + ";\n" : "") +
            "  const bool quads = " + quads +
            ";\n"
            "  const bool clustered = streamed && !cached && sa_clusters();\n"
            "  switch (sa_config) {  // a chosen shape that cannot take these rows: by length\n" +
            chosen + "  }\n  if (I == 1 && R <= " + n(kThreadRowDefaultLength) +
            ") return launch_strided<" + n(kStridedShapes[kThreadRowShape].rows) + ", " +
            n(kStridedShapes[kThreadRowShape].threads) + ">(" + args +
            ", s);  // a thread a row\n  if (cached) {\n" + by_length +
            "  }\n  if (clustered) {\n" + clustered_by_length + "  }\n  if (streamed) {\n" +
            streamed_by_length + "  }\n";
  // A default's launch, behind the bounds (those set) the rows must meet.
  const auto launch_if = [&](const char* indent, std::vector<std::string> bounds,
                             const std::string& walk, const StridedShape& shape) {
    std::erase(bounds, "");
    return indent + (bounds.empty() ? "" : "if (" + join(bounds, " && ") + ") ") + "return " +
           walk + "<" + n(shape.rows) + ", " + n(shape.threads) + ">(" + args + ", s);\n";
  };
  source += "  if (quads) {\n";
  for (const QuadDefault& d : kQuadDefaults) {
    if (no_quads) break;
    source += launch_if("    ",
                        {d.min_length > 0 ? "R >= " + n(d.min_length) : "",
                         d.below_inner > 0 ? "I < " + n(d.below_inner) : ""},
                        "launch_quads", kQuadShapes[d.shape]);
  }
  source += "  }\n";
  for (const StridedDefault& d : kStridedDefaults) {
    source += launch_if("  ",
                        {d.min_inner > 0 ? "I >= " + n(d.min_inner) : "",
                         d.min_length > 0 ? "R >= " + n(d.min_length) : ""},
                        "launch_strided", kStridedShapes[d.shape]);
  }
  source += "}\n";
  return source;
}

}  // namespace cuda_agent::synth

namespace cuda_agent::synth {

bool rows_read_in_place(const RowPlan& plan, std::size_t k, const TensorType& t) {
  if (t.stride.empty()) return true;  // not recorded: as made
  if (k >= plan.inputs.size()) return false;
  const RowInput& in = plan.inputs[k];
  if (t.stride.size() != t.shape.size() || in.dims.size() != t.shape.size()) return false;
  std::vector<std::int64_t> v(plan.rank, 1), vs(plan.rank, 0);
  for (std::size_t j = 0; j < t.shape.size(); ++j) {
    v[in.dims[j]] = t.shape[j];
    vs[in.dims[j]] = t.stride[j];
  }
  const int groups[3][2] = {{0, plan.first_reduced},
                            {plan.first_reduced, plan.last_reduced + 1},
                            {plan.last_reduced + 1, plan.rank}};
  for (const auto& [lo, hi] : groups) {
    int previous = -1;  // the group's last dim of size other than 1 so far
    for (int d = lo; d < hi; ++d) {
      if (v[d] == 1) continue;
      if (previous >= 0 && vs[previous] != vs[d] * v[d]) return false;
      previous = d;
    }
  }
  return true;
}

namespace {

/// The graph values the row kernel reads, in argument order.
std::vector<int> read_values(const RowPlan& plan) {
  std::vector<int> reads;
  for (const RowInput& in : plan.inputs) reads.push_back(in.value);
  return reads;
}

}  // namespace

std::string row_model_source(const Graph& graph, const RowPlan& plan) {
  std::string dims, per_element, segmented, outputs;
  std::size_t segments = 0;
  for (const RowInput& in : plan.inputs) {
    segmented += std::string(in.segmented ? "True" : "False") + ", ";
    segments += in.segmented ? 1 : 0;
    std::string d;
    for (int f : in.dims) d += std::to_string(f) + ", ";
    dims += "(" + d + "), ";
    per_element += std::string(in.per_element ? "True" : "False") + ", ";
  }
  for (const RowOutput& out : plan.outputs) {
    outputs += std::string("(\"") +
               (out.per_element ? "element"
                : out.keepdim   ? "row_keepdim"
                                : "row") +
               "\", torch." + out.dtype + "), ";
  }
  const std::vector<int> reads = read_values(plan);
  std::string bind = "lib.bind(\"fused_rows\", ";
  for (std::size_t k = 0; k < plan.inputs.size() + plan.outputs.size(); ++k) bind += "\"tensor\", ";
  bind +=
      "*[\"i64\"] * " + std::to_string(3 + 7 * plan.inputs.size() + 2 * segments) + ", \"stream\")";
  std::string s =
      "\"\"\"Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
      " in one fused row kernel (kernels/).\"\"\"\n\n"
      "import math\n\nimport torch\nimport torch.nn as nn\n\n" +
      std::string(reads_views(graph, reads) ? "import synth_piece\n" : "") +
      "from utils.kernels import load\n\nlib = load()\nfused_rows = " + bind + "\n" +
      model_config_source("fused_rows") +
      "\n"
      "RANK = " +
      std::to_string(plan.rank) +
      "\n"
      "FIRST, LAST = " +
      std::to_string(plan.first_reduced) + ", " + std::to_string(plan.last_reduced) +
      "  # the reduced dims of the rows' shape\n"
      "INPUT_DIMS = (" +
      dims +
      ")  # the dim of the rows' shape each input's dim lands on\n"
      "PER_ELEMENT = (" +
      per_element +
      ")  # read along the row, or once per row\n"
      "SEGMENTED = (" +
      segmented +
      ")  # read along the row at an index of its own: ((k // div_r) % mod_r) * step\n"
      "OUTPUTS = (" +
      outputs +
      ")\n\n\n"
      "def row_layout(shapes, strides):\n"
      "    \"\"\"(output shapes, O, R, I, per input (div_o, mod_o, stride_o, div_i, mod_i, "
      "stride_i,\n"
      "    step), then (div_r, mod_r) per segmented input) for inputs of these shapes and strides\n"
      "    (in elements): each group of dims (outer, reduced, inner) reads an input at\n"
      "    ((index // div) % mod) * stride, so an input's dims in a group must be one run of\n"
      "    memory; a view that is (a slice, a chunk, a select) is read in place.\"\"\"\n"
      "    virtual, virtual_strides = [], []\n"
      "    for shape, stride, dims in zip(shapes, strides, INPUT_DIMS):\n"
      "        v, vs = [1] * RANK, [0] * RANK\n"
      "        for size, step, d in zip(shape, stride, dims):\n"
      "            v[d], vs[d] = size, step\n"
      "        virtual.append(v)\n"
      "        virtual_strides.append(vs)\n"
      "    full = [max(v[d] for v in virtual) for d in range(RANK)]\n"
      "    if any(v[d] not in (1, full[d]) for v in virtual for d in range(RANK)):\n"
      "        raise ValueError(f\"inputs of shapes {shapes} do not broadcast together\")\n"
      "    groups = ((0, FIRST), (FIRST, LAST + 1), (LAST + 1, RANK))\n"
      "    O, R, I = (math.prod(full[lo:hi]) for lo, hi in groups)\n"
      "    params = []\n"
      "    segments = []  # (div_r, mod_r) of each input read at an index of its own\n"
      "    for v, vs, per_element, segmented, shape in zip(virtual, virtual_strides, "
      "PER_ELEMENT,\n"
      "                                                    SEGMENTED, shapes):\n"
      "        entry = []\n"
      "        for lo, hi in groups:\n"
      "            present = [d for d in range(lo, hi) if v[d] != 1]\n"
      "            if not present:\n"
      "                entry.append((1, 1, 0))\n"
      "                continue\n"
      "            first, last = present[0], present[-1]\n"
      "            if any(v[d] != full[d] for d in range(first, last + 1)):\n"
      "                raise ValueError(f\"an input of shape {shape} is broadcast inside a "
      "group\")\n"
      "            if any(vs[a] != vs[b] * v[b] for a, b in zip(present, present[1:])):\n"
      "                raise ValueError(f\"an input of shape {shape} is not one run of memory "
      "over \"\n"
      "                                 f\"the dims {present} of its strides {vs}\")\n"
      "            entry.append((math.prod(full[last + 1:hi]), math.prod(v[first:last + 1]),\n"
      "                          vs[last]))\n"
      "        (div_o, mod_o, stride_o), (div_r, mod_r, step), (div_i, mod_i, stride_i) = entry\n"
      "        if step and not segmented and (div_r != 1 or mod_r != R):\n"
      "            raise ValueError(f\"an input of shape {shape} covers part of a row\")\n"
      "        if step and not per_element:\n"
      "            raise ValueError(f\"an input of shape {shape} varies along the rows\")\n"
      "        params += [div_o, mod_o, stride_o, div_i, mod_i, stride_i, step]\n"
      "        segments += [div_r, mod_r] if segmented else []\n"
      "    kept = [1 if FIRST <= d <= LAST else full[d] for d in range(RANK)]\n"
      "    dropped = [full[d] for d in range(RANK) if not FIRST <= d <= LAST]\n"
      "    out_shapes = tuple({\"element\": full, \"row_keepdim\": kept, \"row\": dropped}[kind]\n"
      "                       for kind, _ in OUTPUTS)\n"
      "    return out_shapes, O, R, I, tuple(params + segments)\n\n\n";
  const std::string& view = graph.output_view;
  std::string outs_return = plan.outputs.size() == 1 ? "outs[0]" + view
                            : view.empty()           ? "tuple(outs)"
                                                     : "tuple(o" + view + " for o in outs)";
  s += model_class_head(graph, reads, kLayoutMemoInit, /*viewed=*/true) +
       layout_memo_lines("out_shapes, O, R, I, params", "row_layout") +
       "        outs = [torch.empty(shape, dtype=dtype, device=inputs[0].device)\n"
       "                for shape, (_, dtype) in zip(out_shapes, OUTPUTS)]\n"
       "        fused_rows(*inputs, *outs, O, R, I, *params)\n"
       "        return " +
       outs_return + "\n";
  return s;
}

namespace {

/// O, R and I of the plan's sizes at capture: rows' outer extent, length and inner extent.
struct Extents {
  long long O = 1, R = 1, I = 1;
};

Extents extents(const RowPlan& plan) {
  Extents e;
  for (int d = 0; d < static_cast<int>(plan.sizes.size()); ++d) {
    (d < plan.first_reduced ? e.O : d <= plan.last_reduced ? e.R : e.I) *= plan.sizes[d];
  }
  return e;
}

}  // namespace

std::vector<KernelConfig> row_configs(const RowPlan& plan, const std::string& device) {
  if (device != "cuda") return cpu_schedules();
  const auto [O, R, I] = extents(plan);
  const int held = held_inputs(plan);
  std::vector<KernelConfig> configs;
  const auto strided_config = [](int c) {
    return KernelConfig{kStridedConfig + c, "rows " + n(kStridedShapes[c].rows) + " x " +
                                                n(kStridedShapes[c].threads) + " threads"};
  };
  if (I == 1 && R <= kThreadRowDefaultLength) {
    // The launcher's default a thread a row; then the other thread-a-row shape and the cached
    // walk's first shape where it takes the rows.
    configs = {strided_config(kThreadRowShape), strided_config(8)};
    if (R % 4 == 0 && segments_of_4(plan) && fits_registers(kCachedShapes[0], held)) {
      const CachedShape& shape = kCachedShapes[0];
      configs.push_back({0, cached_label(shape.rows, shape.threads, shape.runs, 4)});
    }
    return configs;
  }
  if (I == 1 && R % 4 == 0 && segments_of_4(plan)) {
    // The cached walk: the shapes that reach R, fewest threads first.
    for (std::size_t c = 0; c < std::size(kCachedShapes); ++c) {
      const CachedShape& shape = kCachedShapes[c];
      const long long reach = cached_reach(shape);
      if (!fits_registers(shape, held) || reach < R) continue;
      if (c < kCachedDeep ? configs.size() >= 3 : 2 * R <= reach) continue;
      configs.push_back(
          {static_cast<int>(c), cached_label(shape.rows, shape.threads, shape.runs, 4)});
    }
    // The first two shapes' wide twins, in runs of 8, where they have runs to halve.
    if (sixteen_bit_rows(plan) && R % 8 == 0) {
      const std::size_t narrow = std::min<std::size_t>(configs.size(), 2);
      for (std::size_t k = 0; k < narrow; ++k) {
        if (!has_wide_twin(configs[k].id)) continue;
        const CachedShape& shape = kCachedShapes[configs[k].id];
        configs.push_back({kWideCachedConfig + configs[k].id,
                           cached_label(shape.rows, shape.threads, shape.runs / 2, 8)});
      }
    }
    // Rows of a few elements: a warp a row leaves most lanes idle, so the tuner also tries a
    // thread a row (the strided walk's rows side by side).
    if (!configs.empty() && R <= kThreadRowMaxLength) {
      for (int c : {kThreadRowShape, 8}) configs.push_back(strided_config(c));
    }
    if (!configs.empty()) return configs;
    // The clustered walk where a segment fits a block's shared memory: the default shape
    // first, then the others in order; then the streamed walk's default.
    const int kept = kept_inputs(plan);
    const int clustered = clustered_default(R, kept);
    std::vector<int> order;
    if (clustered >= 0) order.push_back(clustered);
    for (int c = 0; c < static_cast<int>(std::size(kClusteredShapes)); ++c) {
      const long long bytes = clustered_segment(R, kClusteredShapes[c].blocks) * 4 * kept;
      if (c != clustered && bytes <= kClusteredMaxBytes) order.push_back(c);
    }
    for (int c : order) {
      configs.push_back({kClusteredConfig + c, "a row a cluster of " +
                                                   n(kClusteredShapes[c].blocks) + " blocks, " +
                                                   n(kClusteredShapes[c].threads) +
                                                   " threads each, kept in shared memory"});
    }
    // The streamed walk: the default block size first, then its neighbours (after the
    // clustered shapes, its default alone).
    const int by_default = streamed_default(R);
    for (int c : {by_default, by_default + 1, by_default - 1}) {
      if (c < 0 || c >= static_cast<int>(std::size(kStreamedThreads))) continue;
      if (!order.empty() && c != by_default) continue;
      configs.push_back({kStreamedConfig + c, "a row a block, " + n(kStreamedThreads[c]) +
                                                  " threads, 4 elements at a time"});
    }
    return configs;
  }
  if (quad_rows(I) && !has_segmented(plan)) {
    const QuadDefault& d = quad_default(R, I);
    for (int c : {d.shape, d.next[0], d.next[1]})
      configs.push_back({kQuadConfig + c, quad_label(kQuadShapes[c])});
    return configs;
  }
  // The strided walk: the default shape first, then the other shapes for strided rows, or
  // the neighbours by thread count for rows along the last dim.
  const int by_default = strided_default(R, I);
  std::vector<int> order = {by_default};
  if (by_default == 0) {  // rows side by side: fewer or more of them, up to 2 KB a step
    order.insert(order.end(), {1, 2, 3, 8, 9});
  } else {
    for (int c : {by_default - 1, by_default + 1}) {
      if (c >= 4 && c < 8) order.push_back(c);
    }
  }
  for (int c : order) configs.push_back(strided_config(c));
  return configs;
}

Status synthesize_rows(const Graph& graph, const std::string& device, Candidate* candidate) {
  RowPlan plan;
  if (Status s = plan_rows(graph, &plan); !s.ok()) return s;
  const std::string kernel = row_kernel_source(plan, device);
  candidate->files["model_new.py"] = row_model_source(graph, plan);
  if (reads_views(graph, read_values(plan))) candidate->files["synth_piece.py"] = kPieceModule;
  candidate->files[device == "cuda" ? "kernels/fused_rows.cu" : "kernels/fused_rows.cpp"] = kernel;
  candidate->configs = row_configs(plan, device);
  candidate->pattern = sha256_hex(kernel);
  const auto [O, R, I] = extents(plan);
  candidate->shape_class = "rows of " + size_class(R) +
                           (I == 1 ? "" : " strided " + size_class(I)) + ", " + size_class(O * I) +
                           " of them";
  return Status::OK();
}

}  // namespace cuda_agent::synth
