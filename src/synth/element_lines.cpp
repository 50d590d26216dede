#include "synth/element_lines.h"

#include "synth/expression.h"

namespace cuda_agent::synth {

using nlohmann::json;

bool broadcasts_to(const std::vector<std::int64_t>& shape,
                   const std::vector<std::int64_t>& target) {
  if (shape.size() > target.size()) return false;
  const std::size_t offset = target.size() - shape.size();
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] != 1 && shape[k] != target[offset + k]) return false;
  }
  return true;
}

std::vector<int> values_of(const std::vector<ElementInput>& inputs) {
  std::vector<int> values;
  for (const ElementInput& in : inputs) values.push_back(in.value);
  return values;
}

std::set<int> ancestors(const Graph& graph, int value) {
  std::set<int> seen;
  std::vector<int> todo{value};
  while (!todo.empty()) {
    const int v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second || graph.values[v].kind != "op") continue;
    for (int input : graph.ops[graph.values[v].op].inputs) todo.push_back(input);
  }
  return seen;
}

bool ElementLines::operand(int value, const std::vector<std::int64_t>& shape,
                           std::string* variable) {
  if (auto it = variable_.find(value); it != variable_.end()) {
    *variable = it->second;
    return true;
  }
  const Value& v = graph_.values[value];
  const std::string where = side_.after ? "after" : "before";
  if (v.kind == "op") {
    problems_->push_back(graph_.ops[v.op].target + " is read " + where + " the " + side_.kernel +
                         " but not made there");
    return false;
  }
  if (v.results.size() != 1 || !is_input_dtype(v.results[0].dtype)) {
    problems_->push_back("input " + v.name +
                         " is not one float32, bfloat16, float16 or bool tensor");
    return false;
  }
  if (!broadcasts_to(v.results[0].shape, shape)) {
    problems_->push_back("input " + v.name + " does not broadcast to the shape " + where + " the " +
                         side_.kernel);
    return false;
  }
  *variable = "in" + std::to_string(side_.inputs->size());
  side_.inputs->push_back({value, side_.after, v.results[0].dtype});
  variable_[value] = *variable;
  return true;
}

void ElementLines::define(int value, const std::string& variable, bool exact) {
  variable_[value] = variable;
  if (!exact) inexact_.insert(value);
}

bool ElementLines::add(const Op& op, const std::vector<std::int64_t>& shape) {
  const Value& v = graph_.values[op.value];
  const std::string where = side_.after ? "after" : "before";
  if (!is_elementwise_op(op.name)) {
    problems_->push_back(op.target + " is not an elementwise op the " + side_.kernel +
                         " kernel fuses");
    return false;
  }
  if (v.results.size() != 1 || !is_float_dtype(v.results[0].dtype) ||
      !broadcasts_to(v.results[0].shape, shape)) {
    problems_->push_back(op.target + " does not make one float tensor of the shape " + where +
                         " the " + side_.kernel);
    return false;
  }
  std::vector<std::string> operands;
  bool exact = rounds_exactly(op);
  for (std::size_t i = 0; op.args.is_array() && i < op.args.size(); ++i) {
    const json& a = op.args[i];
    std::string variable;
    if (a.is_object() && a.contains("ref")) {
      const int value = graph_.find(a["ref"].get<std::string>());
      if (!operand(value, shape, &variable)) return false;
      exact = exact && !inexact_.count(value);
    }
    operands.push_back(variable);
  }
  std::string problem;
  std::string expression = elementwise_expression(op, operands, &problem);
  if (!problem.empty()) {
    problems_->push_back(problem);
    return false;
  }
  if (exact) {
    expression = rounded(expression, v.results[0].dtype);
  } else {
    inexact_.insert(op.value);
  }
  const std::string name = side_.prefix + std::to_string(side_.lines->size());
  side_.lines->push_back("const float " + name + " = " + expression + ";");
  variable_[op.value] = name;
  side_.ops->push_back(op.name);
  return true;
}

}  // namespace cuda_agent::synth
