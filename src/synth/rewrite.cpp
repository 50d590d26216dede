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
      Value column = g->values[d];
      column.name = g->values[d].name + "_column";
      column.results[0].shape = {column.results[0].shape[0], 1};
      column.results[0].stride = {1, 1};
      column.view = value_expression(g->values[d]) + ".unsqueeze(-1)";
      if (g->find(column.name) < 0) g->values.push_back(column);
      const int c = g->find(column.name);
      op.target = "aten.mul.Tensor";
      op.name = "mul";
      op.op_class = OpClass::kElementwise;
      op.inputs = {b, c};
      op.args = json::array({value_argument(x.name), value_argument(column.name)});
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
    Value view = g->values[source];
    view.name = g->values[made].name + "_view";
    view.results = g->values[made].results;
    view.view =
        value_expression(g->values[source]) + ".unsqueeze(" + std::to_string(dim.get<int>()) + ")";
    view.op = -1;
    if (g->find(view.name) >= 0) continue;
    g->values.push_back(view);
    const int alias = static_cast<int>(g->values.size()) - 1;
    const std::string from = g->values[made].name;
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

}  // namespace

std::vector<AppliedRewrite> rewrite_graph(Graph* graph) {
  std::vector<AppliedRewrite> applied;
  while (rewrite_diag_matmul(graph, &applied) || rewrite_input_views(graph, &applied) ||
         remove_dead_ops(graph, &applied)) {
  }
  return applied;
}

}  // namespace cuda_agent::synth
