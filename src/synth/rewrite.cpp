#include "synth/rewrite.h"

#include <set>

#include "synth/expression.h"
#include "synth/model_source.h"

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
  view.op = -1;
  g->values.push_back(std::move(view));
  return static_cast<int>(g->values.size()) - 1;
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
      op.target = "aten.mul.Tensor";
      op.name = "mul";
      op.op_class = OpClass::kElementwise;
      op.inputs = {a, d};
      op.args = json::array({value_argument(g->values[a].name), value_argument(g->values[d].name)});
      op.kwargs = json::object();
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
      op.target = "aten.mul.Tensor";
      op.name = "mul";
      op.op_class = OpClass::kElementwise;
      op.inputs = {b, c};
      op.args = json::array({value_argument(x.name), value_argument(g->values[c].name)});
      op.kwargs = json::object();
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
    const Value& view = g->values[alias];
    for (Op& reader : g->ops) {
      for (int& v : reader.inputs) v = v == made ? alias : v;
      for (auto& a : reader.args) {
        if (a.is_object() && a.contains("ref") && a["ref"] == from) a["ref"] = view.name;
      }
    }
    for (int& v : g->outputs) v = v == made ? alias : v;
    applied->push_back({"input_view", from + ": " + view.view + " is a view ModelNew makes"});
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
      Op next;
      next.target = target;
      next.name = op_base_name(target);
      next.op_class = classify_op(next.name);
      next.args = std::move(args);
      next.kwargs = json::object();
      for (const json& a : next.args) {
        if (a.is_object()) next.inputs.push_back(g->find(a["ref"].get<std::string>()));
      }
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

    std::vector<Op> merged(g->ops.begin(), g->ops.begin() + static_cast<std::ptrdiff_t>(k));
    merged.insert(merged.end(), ops.begin(), ops.end());
    merged.insert(merged.end(), g->ops.begin() + static_cast<std::ptrdiff_t>(k) + 1, g->ops.end());
    g->ops = std::move(merged);
    for (std::size_t i = 0; i < g->ops.size(); ++i)
      g->values[g->ops[i].value].op = static_cast<int>(i);
    applied->push_back({"batch_norm_eval", made.name + ": batch_norm in eval mode is a "
                                                       "per-channel affine map of its input"});
    return true;
  }
  return false;
}

}  // namespace

std::vector<AppliedRewrite> rewrite_graph(Graph* graph) {
  std::vector<AppliedRewrite> applied;
  while (rewrite_diag_matmul(graph, &applied) || rewrite_batch_norm_eval(graph, &applied) ||
         rewrite_input_views(graph, &applied) || remove_dead_ops(graph, &applied)) {
  }
  return applied;
}

}  // namespace cuda_agent::synth
