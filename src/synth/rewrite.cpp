#include "synth/rewrite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "synth/expression.h"
#include "synth/model_source.h"
#include "synth/pipeline.h"
#include "synth/pool_plan.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

/// An argument naming a value, as the graph IR writes it.
json value_argument(const std::string& name) {
  json argument = json::object();
  argument["ref"] = name;
  return argument;
}

/// The value of a view that ModelNew makes of input, parameter or buffer `source` (its
/// expression followed by `call`, ".unsqueeze(-1)"), named `name`, of these results: the one
/// the graph already has by that name, else a new one.
int input_view(Graph* g, int source, const std::string& name, std::vector<TensorType> results,
               const std::string& call) {
  if (int existing = g->find(name); existing >= 0) return existing;
  Value view = g->values[source];
  view.name = name;
  view.results = std::move(results);
  view.view = value_expression(g->values[source]) + call;
  view.view_root =
      g->values[source].view_root.empty() ? g->values[source].name : g->values[source].view_root;
  view.op = -1;
  g->values.push_back(std::move(view));
  return static_cast<int>(g->values.size()) - 1;
}

/// An op of target over args (a value as {"ref": name}), its class and the values it reads
/// found in g; its value is the caller's to set.
Op make_op(const Graph& g, const std::string& target, json args) {
  Op op;
  op.target = target;
  op.name = op_base_name(target);
  op.op_class = classify_op(op.name);
  op.args = std::move(args);
  op.kwargs = json::object();
  for (const json& a : op.args) {
    if (a.is_object() && a.contains("ref"))
      op.inputs.push_back(g.find(a["ref"].get<std::string>()));
  }
  return op;
}

/// Op k of g replaced by `with` (none: removed), each value knowing its op's new index.
void replace_op(Graph* g, std::size_t k, const std::vector<Op>& with) {
  const auto at = g->ops.begin() + static_cast<std::ptrdiff_t>(k);
  g->ops.insert(g->ops.erase(at), with.begin(), with.end());
  for (std::size_t i = 0; i < g->ops.size(); ++i)
    g->values[g->ops[i].value].op = static_cast<int>(i);
}

/// Every op and output of g that read value `from` reads `to` instead; whether any did.
bool redirect_reads(Graph* g, int from, int to) {
  const std::string from_name = g->values[from].name, to_name = g->values[to].name;
  bool read = false;
  for (Op& reader : g->ops) {
    for (int& v : reader.inputs) {
      read = read || v == from;
      v = v == from ? to : v;
    }
    for (auto& a : reader.args) {
      if (a.is_object() && a.contains("ref") && a["ref"] == from_name) a["ref"] = to_name;
    }
  }
  for (int& v : g->outputs) {
    read = read || v == from;
    v = v == from ? to : v;
  }
  return read;
}

/// Drops every op whose value no output needs, renumbering values and ops.
bool remove_dead_ops(Graph* g, std::vector<AppliedRewrite>* applied) {
  std::vector<bool> live(g->values.size(), false);
  for (int v : g->outputs) live[v] = true;
  for (int k = static_cast<int>(g->ops.size()) - 1; k >= 0; --k) {
    if (!live[g->ops[k].value]) continue;
    for (int v : g->ops[k].inputs) live[v] = true;
  }
  std::vector<std::string> dropped;
  for (const Op& op : g->ops) {
    if (!live[op.value]) dropped.push_back(g->values[op.value].name + " (" + op.target + ")");
  }
  if (dropped.empty()) return false;
  // Keep every non-op value (the task's inputs stay in ModelNew's signature) and live ops.
  std::vector<int> index(g->values.size(), -1);
  Graph out;
  for (std::size_t v = 0; v < g->values.size(); ++v) {
    if (g->values[v].kind == "op" && !live[v]) continue;
    index[v] = static_cast<int>(out.values.size());
    out.values.push_back(g->values[v]);
  }
  for (const Op& op : g->ops) {
    if (!live[op.value]) continue;
    Op kept = op;
    kept.value = index[op.value];
    for (int& v : kept.inputs) v = index[v];
    out.values[kept.value].op = static_cast<int>(out.ops.size());
    out.ops.push_back(std::move(kept));
  }
  for (int v : g->outputs) out.outputs.push_back(index[v]);
  *g = std::move(out);
  for (const auto& d : dropped)
    applied->push_back({"dead_op", "dropped " + d + ": no output reads it"});
  return true;
}

/// The vector d when value is diag(d) of a 1-D d on the main diagonal, else -1.
int diagonal_of(const Graph& g, int value) {
  const Value& v = g.values[value];
  if (v.kind != "op") return -1;
  const Op& op = g.ops[v.op];
  if (op.name != "diag" && op.name != "diag_embed") return -1;
  if (op.name != "diag" || op.inputs.size() != 1) return -1;
  const json& offset = argument(op, 1, "diagonal");
  if (!offset.is_null() && !(offset.is_number_integer() && offset.get<int>() == 0)) return -1;
  const Value& d = g.values[op.inputs[0]];
  if (d.results.size() != 1 || d.results[0].shape.size() != 1) return -1;
  return op.inputs[0];
}

bool rewrite_diag_matmul(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (Op& op : g->ops) {
    if ((op.name != "matmul" && op.name != "mm") || op.inputs.size() != 2) continue;
    const int a = op.inputs[0], b = op.inputs[1];
    const std::vector<TensorType> out = g->values[op.value].results;
    if (out.size() != 1) continue;
    if (int d = diagonal_of(*g, b); d >= 0) {
      // x @ diag(d): out[..., i, j] = x[..., i, j] * d[j], x's shape is out's.
      if (g->values[a].results.size() != 1 || g->values[a].results[0].shape != out[0].shape) {
        continue;
      }
      const int value = op.value;
      op = make_op(
          *g, "aten.mul.Tensor",
          json::array({value_argument(g->values[a].name), value_argument(g->values[d].name)}));
      op.value = value;
      applied->push_back({"diag_matmul", g->values[op.value].name + ": " + g->values[a].name +
                                             " @ diag(" + g->values[d].name +
                                             ") is a column scaling"});
      return true;
    }
    if (int d = diagonal_of(*g, a); d >= 0) {
      // diag(d) @ x for a matrix x: out[i, j] = d[i] * x[i, j], through d viewed as a column.
      const Value x = g->values[b];  // a copy: values grows below
      if (x.results.size() != 1 || x.results[0].shape.size() != 2 ||
          x.results[0].shape != out[0].shape || g->values[d].kind == "op") {
        continue;
      }
      TensorType type = g->values[d].results[0];
      type.shape = {type.shape[0], 1};
      type.stride = {1, 1};
      const int c = input_view(g, d, g->values[d].name + "_column", {type}, ".unsqueeze(-1)");
      const int value = op.value;
      op = make_op(*g, "aten.mul.Tensor",
                   json::array({value_argument(x.name), value_argument(g->values[c].name)}));
      op.value = value;
      applied->push_back({"diag_matmul", g->values[op.value].name + ": diag(" + g->values[d].name +
                                             ") @ " + x.name + " is a row scaling"});
      return true;
    }
  }
  return false;
}

/// An unsqueeze of an input, parameter or buffer becomes a view of it that ModelNew makes
/// (free: no data moves), so a plan reads the tensor with the size-1 dim in place.
bool rewrite_input_views(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (Op& op : g->ops) {
    if (op.name != "unsqueeze" || op.inputs.size() != 1) continue;
    const int source = op.inputs[0];
    const json& dim = argument(op, 1, "dim");
    if (g->values[source].kind == "op" || !dim.is_number_integer()) continue;
    const int made = op.value;
    const std::string from = g->values[made].name;
    if (g->find(from + "_view") >= 0) continue;
    const int alias = input_view(g, source, from + "_view", g->values[made].results,
                                 ".unsqueeze(" + std::to_string(dim.get<int>()) + ")");
    redirect_reads(g, made, alias);
    applied->push_back(
        {"input_view", from + ": " + g->values[alias].view + " is a view ModelNew makes"});
    return true;
  }
  return false;
}

/// batch_norm in eval mode (training false) is a per-channel affine map of x (N, C, ...):
/// (x - running_mean) * rsqrt(running_var + eps) * weight + bias, each (C) vector viewed as
/// (C, 1, ..., 1). As elementwise ops it joins the ops around it in one fused pass, and the
/// elementwise kernel reads each vector once per row of x rather than once per element.
bool rewrite_batch_norm_eval(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op op = g->ops[k];  // a copy: values and ops change below
    if (op.name != "batch_norm") continue;
    const json& training = argument(op, 5, "training");
    const json& eps = argument(op, 7, "eps");
    if (!training.is_boolean() || training.get<bool>() || !eps.is_number()) continue;
    const Value made = g->values[op.value];
    if (made.results.size() != 1 || made.results[0].shape.size() < 2) continue;
    const std::vector<std::int64_t> shape = made.results[0].shape;
    const std::int64_t channels = shape[1];

    // x, weight, bias, running_mean, running_var: a value each, or -1 for None.
    static const char* const kNames[] = {"input", "weight", "bias", "running_mean", "running_var"};
    int operand[5];
    bool fits = true;
    for (int i = 0; i < 5 && fits; ++i) {
      const json& a = argument(op, i, kNames[i]);
      operand[i] = a.is_object() && a.contains("ref") ? g->find(a["ref"].get<std::string>()) : -1;
      if (operand[i] < 0) {
        fits = a.is_null() && (i == 1 || i == 2);  // weight and bias may be None
        continue;
      }
      const Value& v = g->values[operand[i]];
      if (v.results.size() != 1)
        fits = false;
      else if (i == 0)
        fits = v.results[0].shape == shape;
      else
        fits = v.kind != "op" && v.view.empty() && v.results[0].shape == std::vector{channels};
    }
    if (!fits) continue;

    // The vectors as (C, 1, ..., 1) views against x (themselves for a 2-D x).
    const std::size_t trailing = shape.size() - 2;
    std::string view_call = ".view(-1";
    for (std::size_t d = 0; d < trailing; ++d) view_call += ", 1";
    view_call += ")";
    std::vector<std::int64_t> column(1 + trailing, 1);
    column[0] = channels;
    auto per_channel = [&](int vector) {
      if (trailing == 0) return vector;
      TensorType type = g->values[vector].results[0];
      type.shape = column;
      type.stride = std::vector<std::int64_t>(column.size(), 1);
      return input_view(g, vector, g->values[vector].name + "_channels", {type}, view_call);
    };
    // The ops that replace batch_norm, each making a new float32 value; the last makes the
    // batch_norm's own value (its name and dtype), so whatever read it reads the affine map.
    std::vector<Op> ops;
    auto emit = [&](const std::string& target, json args, const std::vector<std::int64_t>& dims) {
      Op next = make_op(*g, target, std::move(args));
      Value v;
      v.name = made.name + "_" + next.name + std::to_string(ops.size());
      v.kind = "op";
      v.results = {TensorType{dims, {}, "float32"}};
      g->values.push_back(v);
      next.value = static_cast<int>(g->values.size()) - 1;
      ops.push_back(next);
      return value_argument(v.name);
    };
    const auto name = [&](int v) { return value_argument(g->values[v].name); };
    const int mean = per_channel(operand[3]), var = per_channel(operand[4]);
    const json shifted = emit("aten.add.Tensor", json::array({name(var), eps}), column);
    const json scale = emit("aten.rsqrt.default", json::array({shifted}), column);
    const json centered =
        emit("aten.sub.Tensor", json::array({name(operand[0]), name(mean)}), shape);
    json result = emit("aten.mul.Tensor", json::array({centered, scale}), shape);
    if (operand[1] >= 0) {
      result = emit("aten.mul.Tensor", json::array({result, name(per_channel(operand[1]))}), shape);
    }
    if (operand[2] >= 0) {
      result = emit("aten.add.Tensor", json::array({result, name(per_channel(operand[2]))}), shape);
    }
    // The last op makes the batch_norm's value instead of its own.
    g->values.pop_back();
    ops.back().value = op.value;

    replace_op(g, k, ops);
    applied->push_back({"batch_norm_eval", made.name + ": batch_norm in eval mode is a "
                                                       "per-channel affine map of its input"});
    return true;
  }
  return false;
}

/// The ops that replace one op of a graph, each making a new value named after the replaced
/// one and of its dtype; finish() makes the last of them make the replaced op's own value, so
/// whatever read it reads their result.
class Decomposition {
 public:
  Decomposition(Graph* g, std::size_t k) : g_(g), k_(k), made_(g->values[g->ops[k].value]) {}

  /// A new op of target over args, making a value of shape (and of the replaced value's dtype
  /// unless another is given); its argument for the next op.
  json emit(const std::string& target, json args, std::vector<std::int64_t> shape,
            std::string dtype = "") {
    Op next = make_op(*g_, target, std::move(args));
    Value v;
    v.name = made_.name + "_" + next.name + std::to_string(ops_.size());
    v.kind = "op";
    v.results = {TensorType{std::move(shape), {}, dtype.empty() ? made_.results[0].dtype : dtype}};
    g_->values.push_back(v);
    next.value = static_cast<int>(g_->values.size()) - 1;
    ops_.push_back(next);
    return value_argument(v.name);
  }

  void finish() {
    g_->values.pop_back();
    ops_.back().value = g_->ops[k_].value;
    replace_op(g_, k_, ops_);
  }

 private:
  Graph* g_;
  std::size_t k_;
  const Value made_;
  std::vector<Op> ops_;
};

/// The value argument `name` of op names, or -1.
int value_operand(const Graph& g, const Op& op, std::size_t index, const char* name) {
  const json& a = argument(op, index, name);
  return a.is_object() && a.contains("ref") ? g.find(a["ref"].get<std::string>()) : -1;
}

/// The one float tensor type of value v, or null.
const TensorType* float_tensor(const Graph& g, int v) {
  if (v < 0 || g.values[v].results.size() != 1) return nullptr;
  const TensorType& t = g.values[v].results[0];
  return is_float_dtype(t.dtype) ? &t : nullptr;
}

/// A number argument (a default where absent), or NaN where it is something else.
double number_argument(const Op& op, std::size_t index, const char* name, double fallback) {
  const json& a = argument(op, index, name);
  if (a.is_null()) return fallback;
  return a.is_number() ? a.get<double>() : std::nan("");
}

/// shape without dim.
std::vector<std::int64_t> reduced(std::vector<std::int64_t> shape, std::size_t dim) {
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(dim));
  return shape;
}

/// pairwise_distance(x1, x2, p, eps) of two tensors of one shape: torch's norm of
/// x1 - x2 + eps over the last dim, as ops of d.
json pairwise_distance(Decomposition* d, int x1, int x2, double p, double eps, bool keepdim,
                       const Graph& g) {
  const std::vector<std::int64_t> shape = g.values[x1].results[0].shape;
  const std::size_t last = shape.size() - 1;
  std::vector<std::int64_t> out = reduced(shape, last);
  if (keepdim) out.insert(out.end(), 1);
  const json diff = d->emit(
      "aten.sub.Tensor",
      json::array({value_argument(g.values[x1].name), value_argument(g.values[x2].name)}), shape);
  const json shifted = d->emit("aten.add.Tensor", json::array({diff, eps}), shape);
  return d->emit("aten.linalg_vector_norm.default",
                 json::array({shifted, p, json::array({static_cast<std::int64_t>(last)}), keepdim}),
                 out);
}

/// Distances and similarities that aten keeps as one op, written as the products, sums and
/// norms they are, which the row plan fuses into one pass over each row:
///   cosine_similarity(x1, x2, dim, eps) = sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps)),
///   as torch divides each by its norm clamped at eps before the product's sum;
///   pairwise_distance(x1, x2, p, eps) = |x1 - x2 + eps|_p over the last dim;
///   triplet_margin_loss = max(margin + d(a, pos) - d(a, neg), 0) of pairwise distances (the
///   second the smaller of d(a, neg) and d(pos, neg) with swap), then its mean or sum.
/// Each needs its tensors of one float shape (no broadcast between them).
bool rewrite_distances(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op op = g->ops[k];  // a copy: values and ops change below
    const std::string& n = op.name;
    if (n != "cosine_similarity" && n != "pairwise_distance" && n != "triplet_margin_loss")
      continue;
    const int operands = n == "triplet_margin_loss" ? 3 : 2;
    std::vector<int> x;
    static const char* const kNames[2][3] = {{"x1", "x2", ""}, {"anchor", "positive", "negative"}};
    for (int i = 0; i < operands; ++i)
      x.push_back(value_operand(*g, op, i, kNames[operands == 3][i]));
    const TensorType* t = float_tensor(*g, x[0]);
    bool fits = t && !t->shape.empty() && float_tensor(*g, op.value);
    for (int v : x) fits = fits && float_tensor(*g, v) && float_tensor(*g, v)->shape == t->shape;
    if (!fits) continue;
    const std::vector<std::int64_t> shape = t->shape;
    const auto rank = static_cast<std::int64_t>(shape.size());
    Decomposition d(g, k);
    const auto name = [&](int v) { return value_argument(g->values[v].name); };
    if (n == "cosine_similarity") {
      const json& dim_arg = argument(op, 2, "dim");
      std::int64_t dim = dim_arg.is_number_integer() ? dim_arg.get<std::int64_t>() : 1;
      dim = dim < 0 ? dim + rank : dim;
      const double eps = number_argument(op, 3, "eps", 1e-8);
      if (dim < 0 || dim >= rank || std::isnan(eps)) continue;
      const std::vector<std::int64_t> out = reduced(shape, static_cast<std::size_t>(dim));
      const json dims = json::array({dim});
      const json product = d.emit("aten.mul.Tensor", json::array({name(x[0]), name(x[1])}), shape);
      const json dot = d.emit("aten.sum.dim_IntList", json::array({product, dims, false}), out);
      json norms[2];
      for (int i = 0; i < 2; ++i) {
        const json norm = d.emit("aten.linalg_vector_norm.default",
                                 json::array({name(x[i]), 2, dims, false}), out);
        norms[i] = d.emit("aten.clamp_min.default", json::array({norm, eps}), out);
      }
      const json denominator = d.emit("aten.mul.Tensor", json::array({norms[0], norms[1]}), out);
      d.emit("aten.div.Tensor", json::array({dot, denominator}), out);
    } else if (n == "pairwise_distance") {
      const double p = number_argument(op, 2, "p", 2), eps = number_argument(op, 3, "eps", 1e-6);
      const json& keepdim = argument(op, 4, "keepdim");
      if (std::isnan(p) || std::isnan(eps) || !(keepdim.is_null() || keepdim.is_boolean()))
        continue;
      pairwise_distance(&d, x[0], x[1], p, eps, keepdim.is_boolean() && keepdim.get<bool>(), *g);
    } else {
      const double margin = number_argument(op, 3, "margin", 1), p = number_argument(op, 4, "p", 2),
                   eps = number_argument(op, 5, "eps", 1e-6);
      const json& swap = argument(op, 6, "swap");
      const json& reduction = argument(op, 7, "reduction");
      const std::int64_t mode = reduction.is_null()             ? 1
                                : reduction.is_number_integer() ? reduction.get<std::int64_t>()
                                                                : -1;
      if (std::isnan(margin) || std::isnan(p) || std::isnan(eps) || mode < 0 || mode > 2 ||
          !(swap.is_null() || swap.is_boolean()) || rank < 2) {
        continue;
      }
      const std::vector<std::int64_t> out = reduced(shape, shape.size() - 1);
      const json positive = pairwise_distance(&d, x[0], x[1], p, eps, false, *g);
      json negative = pairwise_distance(&d, x[0], x[2], p, eps, false, *g);
      if (swap.is_boolean() && swap.get<bool>()) {
        const json swapped = pairwise_distance(&d, x[1], x[2], p, eps, false, *g);
        negative = d.emit("aten.minimum.default", json::array({negative, swapped}), out);
      }
      const json shifted = d.emit("aten.add.Tensor", json::array({positive, margin}), out);
      const json gap = d.emit("aten.sub.Tensor", json::array({shifted, negative}), out);
      const json loss = d.emit("aten.clamp_min.default", json::array({gap, 0.0}), out);
      if (mode != 0)
        d.emit(mode == 1 ? "aten.mean.default" : "aten.sum.default", json::array({loss}), {});
    }
    const std::string made = g->values[op.value].name;
    d.finish();
    applied->push_back({"distance", made + ": " + n + " as the sums and norms it is made of"});
    return true;
  }
  return false;
}

/// cross_entropy of (N, C) logits and N class indices, without a reduction, class weights or
/// label smoothing: logsumexp(x_i) - x_i[t_i], and 0 where t_i is ignore_index. The picked
/// logit is the row's sum of x where the position along it equals t_i, so the row plan reads
/// each row once for both sums (eager writes the whole log_softmax, then gathers from it).
bool rewrite_cross_entropy(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op op = g->ops[k];  // a copy: values and ops change below
    if (op.name != "cross_entropy_loss") continue;
    const int x = value_operand(*g, op, 0, "self"), t = value_operand(*g, op, 1, "target");
    const TensorType* logits = float_tensor(*g, x);
    if (!logits || logits->shape.size() != 2 || t < 0 || g->values[t].results.size() != 1 ||
        g->values[t].results[0].dtype != "int64" ||
        g->values[t].results[0].shape != std::vector{logits->shape[0]} ||
        !argument(op, 2, "weight").is_null() || !float_tensor(*g, op.value)) {
      continue;
    }
    const json& reduction = argument(op, 3, "reduction");
    const json& ignore = argument(op, 4, "ignore_index");
    if (!(reduction.is_number_integer() && reduction.get<int>() == 0) ||
        !(ignore.is_null() || ignore.is_number_integer()) ||
        number_argument(op, 5, "label_smoothing", 0) != 0) {
      continue;
    }
    const std::int64_t rows = logits->shape[0], classes = logits->shape[1];
    const std::int64_t ignored = ignore.is_null() ? -100 : ignore.get<std::int64_t>();
    // Per-row values keep the class dim (as 1) so that they line up with the targets viewed
    // as a column, and lose it at the end.
    const std::vector<std::int64_t> column{rows, 1}, all{rows, classes};
    Decomposition d(g, k);
    const json logit = value_argument(g->values[x].name),
               target = value_argument(g->values[t].name);
    const json dim = json::array({1});
    const json lse = d.emit("aten.logsumexp.default", json::array({logit, dim, true}), column);
    const json index = d.emit("aten.unsqueeze.default", json::array({target, 1}), column, "int64");
    const json position =
        d.emit("aten.arange.default", json::array({classes}), {classes}, "float32");
    const json hit = d.emit("aten.eq.Tensor", json::array({position, index}), all, "bool");
    const json only = d.emit("aten.where.ScalarOther", json::array({hit, logit, 0.0}), all);
    const json picked = d.emit("aten.sum.dim_IntList", json::array({only, dim, true}), column);
    const json loss = d.emit("aten.sub.Tensor", json::array({lse, picked}), column);
    const json skip = d.emit("aten.eq.Scalar", json::array({index, ignored}), column, "bool");
    const json kept = d.emit("aten.where.ScalarSelf", json::array({skip, 0.0, loss}), column);
    d.emit("aten.squeeze.dim", json::array({kept, 1}), {rows});
    const std::string made = g->values[op.value].name;
    d.finish();
    applied->push_back({"cross_entropy", made + ": logsumexp of each row less its target's "
                                                "logit, picked by position"});
    return true;
  }
  return false;
}

/// A product of a matrix (or a batch of them) and a vector, one pass over the matrix bound by
/// memory rather than compute, as the reduction it is: A @ v = sum(A * v, -1) and v @ A =
/// sum(v[:, None] * A, -2), which the row plan takes with v read along (or across) the rows.
bool rewrite_matrix_vector(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op op = g->ops[k];  // a copy: values and ops change below
    if ((op.name != "matmul" && op.name != "mv") || op.inputs.size() != 2) continue;
    const TensorType* a = float_tensor(*g, op.inputs[0]);
    const TensorType* b = float_tensor(*g, op.inputs[1]);
    const TensorType* out = float_tensor(*g, op.value);
    if (!a || !b || !out || a->dtype != b->dtype) continue;
    const bool left = a->shape.size() == 1 && b->shape.size() == 2;   // v @ A
    const bool right = a->shape.size() >= 2 && b->shape.size() == 1;  // A @ v
    if (!left && !right) continue;
    const int matrix = left ? op.inputs[1] : op.inputs[0],
              vector = left ? op.inputs[0] : op.inputs[1];
    std::vector<std::int64_t> shape = g->values[matrix].results[0].shape;
    json vector_arg = value_argument(g->values[vector].name);
    Decomposition d(g, k);
    if (left) {  // v as a column against A (K, N)
      vector_arg = d.emit("aten.unsqueeze.default", json::array({vector_arg, -1}), {shape[0], 1});
    }
    // The products in float32, as the library's GEMV takes them before its float32 sum.
    const json product =
        d.emit("aten.mul.Tensor", json::array({value_argument(g->values[matrix].name), vector_arg}),
               shape, "float32");
    d.emit("aten.sum.dim_IntList", json::array({product, json::array({left ? -2 : -1})}),
           out->shape);
    const std::string made = g->values[op.value].name;
    d.finish();
    applied->push_back({"matrix_vector", made + ": a product with a vector is a sum of " +
                                             "products along the matrix's " +
                                             (left ? "columns" : "rows")});
    return true;
  }
  return false;
}

/// Whether dims first..last of a tensor merge into one by a view (each dim's stride is the next
/// one's stride times its size; dims of size 1 are skipped), so that torch folds them without a
/// copy, which would be compute of torch's inside ModelNew.forward.
bool mergeable(const TensorType& t, std::size_t first, std::size_t last) {
  std::int64_t inner = -1;  // stride times size of the last dim of size > 1 seen, from the right
  for (std::size_t d = last + 1; d-- > first;) {
    if (t.shape[d] == 1) continue;
    if (inner >= 0 && t.stride[d] != inner) return false;
    inner = t.stride[d] * t.shape[d];
  }
  return true;
}

/// A GEMM or convolution operand ModelNew can name: an input, parameter or buffer (or a view of
/// one), or the transpose of its last two dims. Sets *expression and *type; false otherwise.
bool library_operand(const Graph& g, int value, std::string* expression, TensorType* type) {
  const Value& v = g.values[value];
  if (v.results.size() != 1) return false;
  if (v.kind != "op") {
    *expression = value_expression(v);
    *type = v.results[0];
    if (type->stride.empty()) type->stride = contiguous_strides(type->shape);
    return type->stride.size() == type->shape.size();
  }
  const Op& op = g.ops[v.op];
  if (op.inputs.size() != 1) return false;
  const Value& source = g.values[op.inputs[0]];
  if (source.kind == "op" || source.results.size() != 1) return false;
  const std::size_t rank = source.results[0].shape.size();
  if (rank < 2) return false;
  if (op.name == "transpose") {
    const json& a = argument(op, 1, "dim0");
    const json& b = argument(op, 2, "dim1");
    if (!a.is_number_integer() || !b.is_number_integer()) return false;
    const auto last_two = [rank](std::int64_t d) {
      const std::int64_t r = static_cast<std::int64_t>(rank);
      return d == r - 1 || d == r - 2 || d == -1 || d == -2;
    };
    const std::int64_t d0 = a.get<std::int64_t>(), d1 = b.get<std::int64_t>();
    const std::int64_t n0 = d0 < 0 ? d0 + static_cast<std::int64_t>(rank) : d0;
    const std::int64_t n1 = d1 < 0 ? d1 + static_cast<std::int64_t>(rank) : d1;
    if (!last_two(d0) || !last_two(d1) || n0 == n1) return false;
  } else if (op.name != "t" || rank != 2) {
    return false;
  }
  *expression = value_expression(source) + ".transpose(-2, -1)";
  *type = source.results[0];
  if (type->stride.size() != rank) type->stride = contiguous_strides(type->shape);
  std::swap(type->shape[rank - 1], type->shape[rank - 2]);
  std::swap(type->stride[rank - 1], type->stride[rank - 2]);
  return true;
}

/// Whether value v is one of g's outputs.
bool is_output(const Graph& g, int v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

/// How many ops read value v.
std::size_t readers(const Graph& g, int v) {
  return static_cast<std::size_t>(std::count_if(g.ops.begin(), g.ops.end(), [&](const Op& op) {
    return std::find(op.inputs.begin(), op.inputs.end(), v) != op.inputs.end();
  }));
}

/// Whether every op that reads value v only views it (a select, a chunk, a reshape), and no
/// output is v itself.
bool only_views_read(const Graph& g, int v) {
  if (is_output(g, v)) return false;
  return std::all_of(g.ops.begin(), g.ops.end(), [&](const Op& op) {
    return is_view_op(op) || std::find(op.inputs.begin(), op.inputs.end(), v) == op.inputs.end();
  });
}

/// A GEMM (linear, mm, bmm, matmul, addmm) or a convolution whose operands are inputs,
/// parameters or buffers runs in the library (cuBLAS, cuDNN; MKL, oneDNN on the CPU) through
/// torch, an op the evaluator allows, and becomes a value ModelNew computes first; the ops after
/// it, its bias among them, fuse into the plan's kernel, which reads the library's output once.
/// Only where one op follows: a GEMM whose value is an output, or that several ops read, is
/// left alone. A 16-bit bias stays in the library's epilogue (rounded once, as eager does), and
/// so does a linear's bias where only views read its result (its kernel would be a pass for the
/// addition alone, where the library's epilogue adds it for nothing); a 16-bit convolution with
/// a bias is left alone, as its bias is a separate torch kernel. Torch's matmul folds batch dims
/// only where they merge by a view; other layouts are left alone too. A depthwise convolution
/// is left to the window kernel, which computes it with the ops around it, and an attention's
/// GEMMs to the attention kernel (attention_plan.h).
bool rewrite_library_ops(Graph* g, std::vector<AppliedRewrite>* applied) {
  std::set<int> in_attention;  // the attention kernel's GEMMs are its own
  for (const auto& [last, step] : attention_steps(*g)) {
    in_attention.insert(step.ops.begin(), step.ops.end());
  }
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op op = g->ops[k];  // a copy: values and ops change below
    if (op.op_class != OpClass::kGemm && op.op_class != OpClass::kConvolution) continue;
    if (in_attention.count(static_cast<int>(k))) continue;
    if (is_depthwise_convolution(*g, op)) continue;
    const Value made = g->values[op.value];
    if (made.results.size() != 1) continue;
    if (is_output(*g, op.value)) continue;
    // A value ModelNew computes is an expression each reader repeats: one read by several ops
    // stays an op, which a pipeline computes once as a step of its own.
    if (readers(*g, op.value) > 1) continue;
    const TensorType out = made.results[0];
    const std::size_t out_rank = out.shape.size();
    if (!is_16_bit_float(out.dtype) && out.dtype != "float32") continue;

    std::string a, b, expression;
    TensorType ta, tb;
    int bias = -1;  // a value added after the library op, or -1
    const auto operand = [&](std::size_t index, const char* name, std::string* e, TensorType* t) {
      const json& arg = argument(op, index, name);
      if (!arg.is_object() || !arg.contains("ref")) return false;
      const int v = g->find(arg["ref"].get<std::string>());
      return v >= 0 && library_operand(*g, v, e, t);
    };
    const auto optional_value = [&](std::size_t index, const char* name, int* v) {
      const json& arg = argument(op, index, name);
      if (arg.is_null()) return true;
      if (!arg.is_object() || !arg.contains("ref")) return false;
      *v = g->find(arg["ref"].get<std::string>());
      return *v >= 0 && g->values[*v].kind != "op" && g->values[*v].results.size() == 1;
    };
    const std::string& target = op.target;
    if (target == "aten.linear.default") {
      if (!operand(0, "input", &a, &ta) || !operand(1, "weight", &b, &tb)) continue;
      if (ta.shape.size() < 2 || tb.shape.size() != 2) continue;
      if (ta.shape.size() > 2 && !mergeable(ta, 0, ta.shape.size() - 2)) continue;
      if (!optional_value(2, "bias", &bias)) continue;
      std::string in_call;
      if (bias >= 0 && (is_16_bit_float(out.dtype) || only_views_read(*g, op.value))) {
        in_call = ", " + value_expression(g->values[bias]);
        bias = -1;
      }
      expression = "torch.nn.functional.linear(" + a + ", " + b + in_call + ")";
    } else if (target == "aten.mm.default" || target == "aten.bmm.default") {
      if (!operand(0, "self", &a, &ta) || !operand(1, "mat2", &b, &tb)) continue;
      expression = std::string(target == "aten.mm.default" ? "torch.mm(" : "torch.bmm(") + a +
                   ", " + b + ")";
    } else if (target == "aten.addmm.default") {
      const json& beta = argument(op, 3, "beta");
      const json& alpha = argument(op, 4, "alpha");
      const auto one = [](const json& x) { return x.is_null() || (x.is_number() && x == 1); };
      if (!one(beta) || !one(alpha) || is_16_bit_float(out.dtype)) continue;
      if (!operand(1, "mat1", &a, &ta) || !operand(2, "mat2", &b, &tb)) continue;
      if (!optional_value(0, "self", &bias) || bias < 0) continue;
      expression = "torch.mm(" + a + ", " + b + ")";
    } else if (target == "aten.matmul.default") {
      if (!operand(0, "self", &a, &ta) || !operand(1, "other", &b, &tb)) continue;
      const std::size_t ra = ta.shape.size(), rb = tb.shape.size();
      if (ra < 2 || rb < 2) continue;
      bool folds = ra == 2 && rb == 2;
      if (ra > 2 && rb == 2) folds = mergeable(ta, 0, ra - 2);
      if (ra > 2 && rb == ra) {
        folds = std::equal(ta.shape.begin(), ta.shape.end() - 2, tb.shape.begin()) &&
                mergeable(ta, 0, ra - 3) && mergeable(tb, 0, rb - 3);
      }
      if (!folds) continue;
      expression = "torch.matmul(" + a + ", " + b + ")";
    } else if ((op.name == "conv1d" || op.name == "conv2d" || op.name == "conv3d") &&
               target == "aten." + op.name + ".default") {
      // (input, weight, bias, stride, padding, dilation, groups), the rest passed by name.
      if (!operand(0, "input", &a, &ta) || !operand(1, "weight", &b, &tb)) continue;
      if (ta.shape.size() != out_rank || out_rank < 3) continue;  // batched: (N, C, ...)
      if (!optional_value(2, "bias", &bias)) continue;
      if (bias >= 0 && is_16_bit_float(out.dtype)) continue;
      static const char* const kNames[] = {"stride", "padding", "dilation", "groups"};
      std::string rest;
      bool literal_args = true;
      for (std::size_t i = 0; i < 4; ++i) {
        const json& arg = argument(op, 3 + i, kNames[i]);
        if (arg.is_null()) continue;
        literal_args = literal_args && (arg.is_number_integer() || arg.is_array());
        rest += std::string(", ") + kNames[i] + "=" + arg.dump(-1);
      }
      if (!literal_args) continue;
      expression = "torch.nn.functional." + op.name + "(" + a + ", " + b + rest + ")";
    } else {
      continue;
    }

    // The library's result: a value ModelNew computes, contiguous as torch returns it.
    Value library = made;
    library.kind = "input";
    library.target.clear();
    library.op = -1;
    library.view = expression;
    library.view_root.clear();
    library.results[0].stride = contiguous_strides(out.shape);
    std::string detail = made.name + ": " + expression + " runs in the library";
    if (bias < 0) {
      // The library's result is the op's own value: whatever read it reads it unchanged.
      g->values[op.value] = library;
      replace_op(g, k, {});
    } else {
      // The op becomes the bias's addition, over (C, 1, ...) for a convolution's channels.
      library.name = made.name + "_library";
      g->values.push_back(library);
      const int result = static_cast<int>(g->values.size()) - 1;
      int added = bias;
      if (op.op_class == OpClass::kConvolution) {
        std::vector<std::int64_t> column(out_rank - 1, 1);
        column[0] = out.shape[1];
        TensorType type = g->values[bias].results[0];
        type.shape = column;
        type.stride = std::vector<std::int64_t>(column.size(), 1);
        std::string call = ".view(-1";
        for (std::size_t d = 2; d < out_rank; ++d) call += ", 1";
        added = input_view(g, bias, g->values[bias].name + "_channels", {type}, call + ")");
      }
      g->ops[k] = make_op(*g, "aten.add.Tensor",
                          json::array({value_argument(g->values[result].name),
                                       value_argument(g->values[added].name)}));
      g->ops[k].value = op.value;
      detail += ", then its bias " + g->values[added].name + " is added in the fused kernel";
    }
    applied->push_back({"library_op", detail});
    return true;
  }
  return false;
}

/// The strides of each result of view op given its input's strides, for the views that keep
/// the input's dims (chunk, split, a slice of step 1) or drop one (select); false for any other
/// op.
bool view_strides(const Graph& g, const Op& op, const std::vector<std::int64_t>& in,
                  std::vector<std::vector<std::int64_t>>* out) {
  const std::size_t results = g.values[op.value].results.size();
  const json& step = argument(op, 4, "step");
  const bool unit_slice = op.name == "slice" && (step.is_null() || step == 1);
  if (op.name == "chunk" || op.name == "split" || unit_slice) {
    out->assign(results, in);  // every piece walks memory as the whole does
    return true;
  }
  if (op.name == "select" || op.name == "unbind") {
    const json& dim = argument(op, 1, "dim");
    if (!dim.is_number_integer() || in.empty()) return false;
    const auto rank = static_cast<std::int64_t>(in.size());
    const std::int64_t d = (dim.get<std::int64_t>() + rank) % rank;
    std::vector<std::int64_t> kept = in;
    kept.erase(kept.begin() + d);
    out->assign(results, kept);
    return true;
  }
  return false;
}

/// Value v's strides set to stride, and those of the views that read it (chunks, selects and
/// slices of it, and theirs) set to match: what a rewrite that changes a value's layout owes
/// the plans, which decide from the strides which views a kernel reads in place.
void restride(Graph* g, int v, const std::vector<std::int64_t>& stride) {
  for (TensorType& t : g->values[v].results) t.stride = stride;
  for (const Op& reader : g->ops) {
    if (reader.inputs.empty() || reader.inputs[0] != v) continue;
    std::vector<std::vector<std::int64_t>> strides;
    if (!view_strides(*g, reader, stride, &strides)) continue;
    const int made = reader.value;
    if (strides.size() == 1) {
      restride(g, made, strides[0]);
      continue;
    }
    for (std::size_t r = 0; r < strides.size(); ++r) g->values[made].results[r].stride = strides[r];
    // getitem k of a chunk or split reads piece k's strides
    for (const Op& item : g->ops) {
      if (item.name != "getitem" || item.inputs.empty() || item.inputs[0] != made) continue;
      const json& k = argument(item, 1, "index");
      if (k.is_number_integer() && k.get<std::size_t>() < strides.size())
        restride(g, item.value, strides[k.get<std::size_t>()]);
    }
  }
}

/// Linears of every slice of one tensor along a dim other than its features, x.select(d, i)
/// for each i, with one weight and bias, are one linear of x whose result's slice i is each
/// one's: the input projection of a recurrence hoisted out of its steps. One GEMM of x's rows
/// together keeps every multiprocessor busy where each slice's GEMM alone leaves most idle, and
/// it reads the weight once. Each slice's linear becomes a piece of one unbind of the whole's
/// result along d (a getitem of it is no op; a select each would be one for the evaluator's
/// guard at every step).
bool rewrite_slice_linears(Graph* g, std::vector<AppliedRewrite>* applied) {
  // (x, d, weight, bias) -> (op, i) of each linear of x.select(d, i)
  std::map<std::tuple<int, std::int64_t, int, int>,
           std::vector<std::pair<std::size_t, std::int64_t>>>
      groups;
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op& op = g->ops[k];
    if (op.target != "aten.linear.default" || op.inputs.empty()) continue;
    const int slice = op.inputs[0];
    const Value& sliced = g->values[slice];
    if (sliced.kind != "op" || g->ops[sliced.op].target != "aten.select.int") continue;
    const Op& select = g->ops[sliced.op];
    const int x = select.inputs.empty() ? -1 : select.inputs[0];
    const TensorType* xt = float_tensor(*g, x);
    const json& dim = argument(select, 1, "dim");
    const json& index = argument(select, 2, "index");
    if (!xt || !dim.is_number_integer() || !index.is_number_integer()) continue;
    const auto rank = static_cast<std::int64_t>(xt->shape.size());
    if (rank < 2) continue;
    const std::int64_t d = (dim.get<std::int64_t>() + rank) % rank;
    if (d == rank - 1) continue;  // a slice of the features is no row of the GEMM
    const std::int64_t i = (index.get<std::int64_t>() + xt->shape[d]) % xt->shape[d];
    const int weight = value_operand(*g, op, 1, "weight");
    int bias = -1;
    if (!argument(op, 2, "bias").is_null()) {
      bias = value_operand(*g, op, 2, "bias");
      if (bias < 0) continue;
    }
    if (weight < 0 || !float_tensor(*g, op.value)) continue;
    groups[{x, d, weight, bias}].push_back({k, i});
  }
  for (const auto& [key, members] : groups) {
    const auto [x, d, weight, bias] = key;
    const TensorType xt = g->values[x].results[0];
    std::set<std::int64_t> covered;
    for (const auto& member : members) covered.insert(member.second);
    // Only where every slice is projected: a part of them would cost rows no one reads.
    if (members.size() < 2 || static_cast<std::int64_t>(covered.size()) != xt.shape[d]) continue;

    const Value first = g->values[g->ops[members[0].first].value];
    std::vector<std::int64_t> shape = xt.shape;
    shape.back() = first.results[0].shape.back();
    Value whole;
    whole.name = first.name + "_of_every_slice";
    whole.kind = "op";
    whole.results = {TensorType{shape, contiguous_strides(shape), first.results[0].dtype}};
    g->values.push_back(whole);
    const int whole_value = static_cast<int>(g->values.size()) - 1;
    json args =
        json::array({value_argument(g->values[x].name), value_argument(g->values[weight].name)});
    if (bias >= 0) args.push_back(value_argument(g->values[bias].name));
    Op linear = make_op(*g, "aten.linear.default", std::move(args));
    linear.value = whole_value;

    std::vector<std::int64_t> slice_stride = whole.results[0].stride;
    slice_stride.erase(slice_stride.begin() + d);
    std::vector<std::int64_t> slice_shape = shape;
    slice_shape.erase(slice_shape.begin() + d);
    Value pieces;
    pieces.name = whole.name + "_steps";
    pieces.kind = "op";
    pieces.results.assign(static_cast<std::size_t>(shape[d]),
                          TensorType{slice_shape, slice_stride, first.results[0].dtype});
    g->values.push_back(pieces);
    const int pieces_value = static_cast<int>(g->values.size()) - 1;
    Op unbind = make_op(*g, "aten.unbind.int", json::array({value_argument(whole.name), d}));
    unbind.value = pieces_value;
    // Replaced from the last op back, so that the indices of those before stay as they are.
    for (auto m = members.rbegin(); m != members.rend(); ++m) {
      const int made = g->ops[m->first].value;
      Op item =
          make_op(*g, "operator.getitem", json::array({value_argument(pieces.name), m->second}));
      item.value = made;
      std::vector<Op> with = {item};
      if (m + 1 == members.rend()) with.insert(with.begin(), {linear, unbind});
      replace_op(g, m->first, with);
      restride(g, made, slice_stride);
    }
    applied->push_back({"slice_linears", std::to_string(members.size()) + " linears of " +
                                             g->values[x].name + "'s slices along dim " +
                                             std::to_string(d) + " are one, " + whole.name +
                                             ", each reading its slice"});
    return true;
  }
  return false;
}

/// Where a float32 linear's result reaches elementwise ops only, through views that keep its
/// features whole (a select or unbind of another dim, a chunk or split of any dim) and no
/// output, its bias moves out of the GEMM into those ops: the GEMM runs as a plain mm, and each
/// piece the elementwise ops read gains an addition of the bias's matching piece (a chunk of
/// the bias where the view chunked the features), which fuses into their kernel. What inductor
/// does with a linear before pointwise ops: cuBLAS's heuristics pick another, often faster,
/// kernel for the GEMM without the bias's epilogue (the unrolled GRU's 256 x 1024 x 3072 steps:
/// 58 us each with it, 47 without), and the bias costs the kernel one vector's read. A 16-bit
/// linear keeps its bias, rounded once in the library's epilogue as eager rounds it.
class LinearBias {
 public:
  LinearBias(Graph* g, std::size_t k) : g_(g), k_(k) {}

  bool apply(std::vector<AppliedRewrite>* applied) {
    const Op& op = g_->ops[k_];
    if (op.target != "aten.linear.default" || argument(op, 2, "bias").is_null()) return false;
    bias_ = value_operand(*g_, op, 2, "bias");
    const TensorType* out = float_tensor(*g_, op.value);
    const TensorType* b = float_tensor(*g_, bias_);
    if (!out || !b || out->dtype != "float32" || b->dtype != "float32" || b->shape.size() != 1 ||
        g_->values[bias_].kind == "op" || out->shape.empty())
      return false;
    if (!reach(op.value, static_cast<int>(out->shape.size()) - 1, bias_) || leaves_.empty())
      return false;

    Op plain = op;
    if (plain.args.size() > 2) plain.args[2] = nullptr;
    plain.kwargs.erase("bias");
    if (plain.inputs.size() > 2) plain.inputs.erase(plain.inputs.begin() + 2);
    const std::string linear_name = g_->values[op.value].name;
    std::map<int, std::vector<Op>> before;  // additions by the op (index) that reads them
    for (const Leaf& leaf : leaves_) {
      Value sum = g_->values[leaf.value];
      sum.name += "_biased";
      sum.kind = "op";
      sum.view.clear();
      sum.view_root.clear();
      sum.results[0].stride = contiguous_strides(sum.results[0].shape);
      g_->values.push_back(sum);
      const int made = static_cast<int>(g_->values.size()) - 1;
      Op add = make_op(*g_, "aten.add.Tensor",
                       json::array({value_argument(g_->values[leaf.value].name),
                                    value_argument(g_->values[leaf.bias].name)}));
      add.value = made;
      redirect_reads(g_, leaf.value, made);
      before[leaf.reader].push_back(add);
    }
    std::vector<Op> ops = bias_ops_;  // they read the bias alone: first
    for (std::size_t i = 0; i < g_->ops.size(); ++i) {
      if (const auto b = before.find(static_cast<int>(i)); b != before.end())
        ops.insert(ops.end(), b->second.begin(), b->second.end());
      ops.push_back(i == k_ ? plain : g_->ops[i]);
    }
    g_->ops = std::move(ops);
    for (std::size_t i = 0; i < g_->ops.size(); ++i)
      g_->values[g_->ops[i].value].op = static_cast<int>(i);
    applied->push_back({"linear_bias", linear_name + ": its bias " + g_->values[bias_].name +
                                           " is added in the kernel of the " +
                                           std::to_string(leaves_.size()) +
                                           " elementwise op(s) that read it, the GEMM runs "
                                           "without it"});
    return true;
  }

 private:
  struct Leaf {
    int value;   // a piece of the linear's result that an elementwise op reads
    int bias;    // the bias's piece that matches its features
    int reader;  // the op that reads it (index)
  };

  /// Whether every way value v (features along dim `features`, matched by bias piece `bias`)
  /// is read ends at one elementwise op, through views that keep the features whole.
  bool reach(int v, int features, int bias) {
    if (is_output(*g_, v)) return false;
    const auto rank = static_cast<int>(g_->values[v].results.at(0).shape.size());
    std::vector<int> reading;
    for (std::size_t i = 0; i < g_->ops.size(); ++i) {
      const Op& r = g_->ops[i];
      if (std::find(r.inputs.begin(), r.inputs.end(), v) != r.inputs.end())
        reading.push_back(static_cast<int>(i));
    }
    for (int i : reading) {
      const Op& r = g_->ops[i];
      if (!is_view_op(r)) {
        if (r.op_class != OpClass::kElementwise || reading.size() != 1) return false;
        leaves_.push_back({v, bias, i});
        continue;
      }
      if (r.inputs.empty() || r.inputs[0] != v) return false;
      const bool select = r.name == "select" || r.name == "unbind";
      const bool pieces = r.name == "chunk" || r.name == "split" || r.name == "split_with_sizes";
      const json& dim_arg = argument(r, select ? 1 : 2, "dim");
      if ((!select && !pieces) || (!dim_arg.is_null() && !dim_arg.is_number_integer()))
        return false;
      const int d = ((dim_arg.is_null() ? 0 : dim_arg.get<int>()) + rank) % rank;
      if (select && d == features) return false;
      const int kept = select && d < features ? features - 1 : features;
      if (r.name == "select") {
        if (!reach(r.value, kept, bias)) return false;
        continue;
      }
      // A tuple of pieces: each getitem of it is a piece, with the bias's piece where the
      // features were split.
      const int bias_pieces = pieces && d == features ? split_bias(r, bias) : -1;
      if (pieces && d == features && bias_pieces < 0) return false;
      for (std::size_t j = 0; j < g_->ops.size(); ++j) {
        const Op& item = g_->ops[j];
        if (std::find(item.inputs.begin(), item.inputs.end(), r.value) == item.inputs.end())
          continue;
        const json& index = argument(item, 1, "index");
        if (item.name != "getitem" || !index.is_number_integer()) return false;
        const int piece_bias = bias_pieces < 0 ? bias : bias_piece(bias_pieces, index.get<int>());
        if (!reach(item.value, kept, piece_bias)) return false;
      }
    }
    return true;
  }

  /// The bias's pieces as view op r splits the features: the same op over the bias (dim 0),
  /// made once for each distinct split; -1 where r's split is not a literal.
  int split_bias(const Op& r, int bias) {
    const json& how = argument(r, 1,
                               r.name == "chunk"   ? "chunks"
                               : r.name == "split" ? "split_size"
                                                   : "split_sizes");
    if (!how.is_number_integer() && !how.is_array()) return -1;
    const std::string key = std::to_string(bias) + r.target + how.dump();
    if (const auto found = splits_.find(key); found != splits_.end()) return found->second;
    const TensorType& b = g_->values[bias].results[0];
    const Value& whole = g_->values[r.value];
    Value pieces;
    pieces.name = g_->values[bias].name + "_pieces" + std::to_string(splits_.size());
    pieces.kind = "op";
    for (const TensorType& t : whole.results)
      pieces.results.push_back(TensorType{{t.shape.back()}, b.stride, b.dtype});
    g_->values.push_back(pieces);
    const int made = static_cast<int>(g_->values.size()) - 1;
    Op split = make_op(*g_, r.target, json::array({value_argument(g_->values[bias].name), how, 0}));
    split.value = made;
    bias_ops_.push_back(split);
    splits_[key] = made;
    return made;
  }

  /// Piece `index` of the bias's pieces, a getitem made once.
  int bias_piece(int pieces, int index) {
    const std::string name = g_->values[pieces].name + "_" + std::to_string(index);
    if (const int found = g_->find(name); found >= 0) return found;
    Value piece;
    piece.name = name;
    piece.kind = "op";
    piece.results = {g_->values[pieces].results.at(static_cast<std::size_t>(index))};
    g_->values.push_back(piece);
    Op item = make_op(*g_, "operator.getitem",
                      json::array({value_argument(g_->values[pieces].name), index}));
    item.value = static_cast<int>(g_->values.size()) - 1;
    bias_ops_.push_back(item);
    return item.value;
  }

  Graph* g_;
  std::size_t k_;
  int bias_ = -1;
  std::vector<Leaf> leaves_;
  std::vector<Op> bias_ops_;
  std::map<std::string, int> splits_;
};

bool rewrite_linear_bias(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    const Op& op = g->ops[k];
    if (op.target != "aten.linear.default" || argument(op, 2, "bias").is_null()) continue;
    // Tried on a copy: a linear whose reads do not all qualify leaves the graph as it was.
    Graph trial = *g;
    if (LinearBias(&trial, k).apply(applied)) {
      *g = std::move(trial);
      return true;
    }
  }
  return false;
}

/// Whether value v is all zeros: zeros_like, zeros or new_zeros.
bool is_zeros(const Graph& g, int v) {
  if (v < 0 || g.values[v].kind != "op") return false;
  const std::string& name = g.ops[g.values[v].op].name;
  return name == "zeros_like" || name == "zeros" || name == "new_zeros";
}

/// A sum with zeros, zeros + y, y + zeros or y - zeros, is y itself where y has the sum's shape
/// and dtype: the zeros' allocation and the pass that reads them are dead work (an accumulator
/// started at zero before a loop adds to it). The sum's readers read y; where the sum is an
/// output, only an op's y takes its place, so that no output is an input itself.
bool rewrite_zero_sums(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (const Op& op : g->ops) {
    const bool add = op.target == "aten.add.Tensor", sub = op.target == "aten.sub.Tensor";
    if ((!add && !sub) || op.inputs.size() != 2) continue;
    const json& alpha = argument(op, 2, "alpha");
    if (!alpha.is_null() && !(alpha.is_number() && alpha == 1)) continue;
    int y = -1;
    if (is_zeros(*g, op.inputs[1])) {
      y = op.inputs[0];
    } else if (add && is_zeros(*g, op.inputs[0])) {
      y = op.inputs[1];
    }
    const TensorType* sum = float_tensor(*g, op.value);
    const TensorType* kept = float_tensor(*g, y);
    if (!sum || !kept || kept->shape != sum->shape || kept->dtype != sum->dtype) continue;
    const bool output = is_output(*g, op.value);
    if (output && g->values[y].kind != "op") continue;
    if (!output && readers(*g, op.value) == 0) continue;  // redirected already: dead
    const std::string made = g->values[op.value].name, read = g->values[y].name;
    redirect_reads(g, op.value, y);
    applied->push_back({"zero_sum", made + ": a sum with zeros is " + read + " itself"});
    return true;
  }
  return false;
}

/// group_norm of x (N, C, ...) with G groups is an instance norm of x viewed as (N, G, C / G,
/// ...), each (sample, group) normalised over its channels and the rest, then the affine map per
/// channel. The rewrite turns group_norm into that instance norm (no weight or bias) and a
/// multiply and add by the weight and bias viewed (G, C / G, 1, ...), and carries every other op
/// into the split shape: the leaves they read viewed to match (a per-channel vector in groups),
/// the outputs viewed back (Graph::output_view). It takes a graph with one group_norm whose other
/// ops are elementwise, of its shape, reading each other, leaves and scalars.
bool rewrite_group_norm(Graph* g, std::vector<AppliedRewrite>* applied) {
  if (!g->output_view.empty()) return false;
  int norm = -1;
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    if (g->ops[k].name != "group_norm") continue;
    if (norm >= 0) return false;
    norm = static_cast<int>(k);
  }
  if (norm < 0) return false;
  const Op op = g->ops[norm];  // a copy: values and ops change below
  const json& groups_arg = argument(op, 1, "num_groups");
  const json& eps = argument(op, 4, "eps");
  if (op.inputs.empty() || !groups_arg.is_number_integer() || !eps.is_number()) return false;
  const int x = op.inputs[0];
  const Value made = g->values[op.value];
  if (g->values[x].results.size() != 1 || made.results.size() != 1) return false;
  const std::vector<std::int64_t> shape = made.results[0].shape;
  const std::size_t rank = shape.size();
  const std::int64_t groups = groups_arg.get<std::int64_t>();
  if (rank < 3 || groups < 1 || shape[1] % groups != 0 || g->values[x].results[0].shape != shape) {
    return false;
  }
  // Where a leaf's dims, aligned from the right, meet the channel dim (negative: they do not).
  const auto channel_at = [rank](const TensorType& t) {
    return static_cast<std::ptrdiff_t>(t.shape.size()) - static_cast<std::ptrdiff_t>(rank - 1);
  };
  for (const Op& other : g->ops) {
    if (other.name == "group_norm") continue;
    const Value& v = g->values[other.value];
    if (other.op_class != OpClass::kElementwise || v.results.size() != 1 ||
        v.results[0].shape != shape) {
      return false;
    }
    for (int in : other.inputs) {
      const Value& read = g->values[in];
      if (read.kind == "op") continue;  // of the norm's shape, as every op here is
      if (read.results.size() != 1 || read.results[0].shape.size() > rank) return false;
      const std::ptrdiff_t at = channel_at(read.results[0]);
      if (at >= 0 && read.results[0].shape[at] != shape[1] && read.results[0].shape[at] != 1) {
        return false;
      }
    }
  }
  for (int out : g->outputs) {
    if (g->values[out].kind != "op") return false;
  }

  const std::string g_text = std::to_string(groups);
  std::vector<std::int64_t> split_shape = shape;
  split_shape[1] = groups;
  split_shape.insert(split_shape.begin() + 2, shape[1] / groups);
  const auto resize = [&](int v) {
    TensorType& t = g->values[v].results[0];
    t.shape = split_shape;
    t.stride = contiguous_strides(split_shape);
  };
  // A leaf in the split shape: its size at the channel dim becomes (G, C / G), or (1, 1).
  const auto split_leaf = [&](int leaf) {
    const TensorType t = g->values[leaf].results[0];
    const std::ptrdiff_t at = channel_at(t);
    if (at < 0) return leaf;
    const bool channels = t.shape[at] == shape[1];
    TensorType type = t;
    type.shape[at] = channels ? groups : 1;
    type.shape.insert(type.shape.begin() + at + 1, channels ? shape[1] / groups : 1);
    type.stride = contiguous_strides(type.shape);
    const std::string call = channels
                                 ? ".unflatten(" + std::to_string(at) + ", (" + g_text + ", -1))"
                                 : ".unsqueeze(" + std::to_string(at) + ")";
    return input_view(g, leaf, g->values[leaf].name + "_groups", {type}, call);
  };
  const auto argument_of = [&](int v) { return value_argument(g->values[v].name); };
  for (std::size_t k = 0; k < g->ops.size(); ++k) {
    if (static_cast<int>(k) == norm) continue;
    for (std::size_t i = 0; i < g->ops[k].inputs.size(); ++i) {
      const int in = g->ops[k].inputs[i];
      if (g->values[in].kind == "op") continue;
      const int view = split_leaf(in);
      if (view == in) continue;
      const std::string from = g->values[in].name;
      g->ops[k].inputs[i] = view;
      for (json& a : g->ops[k].args) {
        if (a.is_object() && a.contains("ref") && a["ref"] == from) a = argument_of(view);
      }
    }
    resize(g->ops[k].value);
  }

  // group_norm becomes the instance norm of x in groups, then the affine map.
  const int x_split = g->values[x].kind == "op" ? x : split_leaf(x);
  std::vector<Op> ops;
  const auto emit = [&](const std::string& target, json args, const std::string& name) {
    Op next = make_op(*g, target, std::move(args));
    Value v = made;
    v.name = name;
    g->values.push_back(v);
    next.value = static_cast<int>(g->values.size()) - 1;
    resize(next.value);
    ops.push_back(next);
    return value_argument(name);
  };
  json result = emit("aten.instance_norm.default",
                     json::array({argument_of(x_split), nullptr, nullptr, nullptr, nullptr, true,
                                  0.0, eps, false}),
                     made.name + "_normalized");
  std::string per_group = ".view(" + g_text + ", -1";
  for (std::size_t d = 2; d < rank; ++d) per_group += ", 1";
  per_group += ")";
  std::vector<std::int64_t> vector_shape(rank, 1);
  vector_shape[0] = groups;
  vector_shape[1] = shape[1] / groups;
  for (auto [index, name, target] :
       {std::tuple{2, "weight", "aten.mul.Tensor"}, std::tuple{3, "bias", "aten.add.Tensor"}}) {
    const json& a = argument(op, index, name);
    if (!a.is_object() || !a.contains("ref")) continue;
    const int vector = g->find(a["ref"].get<std::string>());
    if (vector < 0 || g->values[vector].results.size() != 1) continue;
    TensorType type = g->values[vector].results[0];
    type.shape = vector_shape;
    type.stride = contiguous_strides(vector_shape);
    const int view = input_view(g, vector, g->values[vector].name + "_groups", {type}, per_group);
    result = emit(target, json::array({result, argument_of(view)}),
                  made.name + "_" + name + std::to_string(ops.size()));
  }
  // The last op makes the norm's own value, which the ops after it read.
  g->values.pop_back();
  ops.back().value = op.value;
  resize(op.value);
  replace_op(g, static_cast<std::size_t>(norm), ops);
  g->output_view = ".flatten(1, 2)";
  applied->push_back({"group_norm", made.name + ": group_norm in " + g_text +
                                        " groups is an instance norm of " + g->values[x].name +
                                        " viewed as (N, " + g_text + ", C / " + g_text + ", ...)"});
  return true;
}

/// getitem k of broadcast_tensors is operand k itself where the broadcast leaves its shape as
/// it is (tensors of one shape, as a loss's prediction and target): its readers read the operand,
/// and the broadcast, read no more, is dropped as dead.
bool rewrite_identity_broadcast(Graph* g, std::vector<AppliedRewrite>* applied) {
  for (const Op& op : g->ops) {
    if (op.name != "getitem" || op.inputs.size() != 1) continue;
    const Value& source = g->values[op.inputs[0]];
    if (source.kind != "op" || g->ops[source.op].name != "broadcast_tensors") continue;
    const json& index = argument(op, 1, "index");
    const Op& broadcast = g->ops[source.op];
    if (!index.is_number_integer() || index.get<int>() < 0 ||
        index.get<std::size_t>() >= broadcast.inputs.size()) {
      continue;
    }
    const int operand = broadcast.inputs[index.get<std::size_t>()];
    const Value& made = g->values[op.value];
    if (g->values[operand].results.size() != 1 || made.results.size() != 1 ||
        g->values[operand].results[0].shape != made.results[0].shape) {
      continue;
    }
    const std::string from = made.name, to = g->values[operand].name;
    if (!redirect_reads(g, op.value, operand)) continue;  // read by nothing: left to dead_op
    applied->push_back({"identity_broadcast", from + ": broadcast_tensors leaves " + to +
                                                  " as it is; " + to + " is read in its place"});
    return true;
  }
  return false;
}

}  // namespace

std::vector<AppliedRewrite> rewrite_graph(Graph* graph) {
  std::vector<AppliedRewrite> applied;
  while (rewrite_diag_matmul(graph, &applied) || rewrite_slice_linears(graph, &applied) ||
         rewrite_linear_bias(graph, &applied) || rewrite_zero_sums(graph, &applied) ||
         rewrite_batch_norm_eval(graph, &applied) || rewrite_distances(graph, &applied) ||
         rewrite_cross_entropy(graph, &applied) || rewrite_matrix_vector(graph, &applied) ||
         rewrite_library_ops(graph, &applied) || rewrite_group_norm(graph, &applied) ||
         rewrite_input_views(graph, &applied) || rewrite_identity_broadcast(graph, &applied) ||
         remove_dead_ops(graph, &applied)) {
  }
  return applied;
}

}  // namespace cuda_agent::synth
