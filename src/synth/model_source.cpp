#include "synth/model_source.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace cuda_agent::synth {

namespace {

bool is_index(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

/// The Python of an attribute path below self: "fc1.0.weight" -> "self.fc1[0].weight" (the
/// items of an nn.ModuleList or nn.Sequential by index).
std::string attribute_expression(const std::string& path) {
  std::string expression = "self";
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    expression += is_index(part) ? "[" + part + "]" : "." + part;
    if (dot == std::string::npos) return expression;
    start = dot + 1;
  }
}

}  // namespace

std::string module_state_source(const Graph& graph) {
  // The submodules the parameters and buffers lie in, and each one's children: a submodule
  // whose children are all indices is an nn.ModuleList of that many, so that the state_dict's
  // keys ("fc1.0.weight") come out the same.
  std::vector<std::string> modules;
  std::map<std::string, std::set<std::string>> children;
  for (const Value& v : graph.values) {
    if ((v.kind != "parameter" && v.kind != "buffer") || !v.view.empty()) continue;
    std::string owner;
    for (std::size_t dot = v.target.find('.'); dot != std::string::npos;
         dot = v.target.find('.', dot + 1)) {
      const std::string module = v.target.substr(0, dot);
      const std::string child = module.substr(owner.empty() ? 0 : owner.size() + 1);
      if (!owner.empty()) children[owner].insert(child);
      if (!children.count(module)) {
        children[module];
        modules.push_back(module);
      }
      owner = module;
    }
  }
  std::string init;
  for (const std::string& module : modules) {
    const auto& kids = children[module];
    const bool list = !kids.empty() && std::all_of(kids.begin(), kids.end(), is_index);
    const std::size_t dot = module.rfind('.');
    const bool item = dot != std::string::npos && is_index(module.substr(dot + 1));
    if (item && !list) continue;  // the nn.Module its list was made with
    std::string made = "nn.Module()";
    if (list) {
      int count = 0;
      for (const std::string& kid : kids) count = std::max(count, std::stoi(kid) + 1);
      made = "nn.ModuleList([nn.Module() for _ in range(" + std::to_string(count) + ")])";
    }
    init += "        " + attribute_expression(module) + " = " + made + "\n";
  }
  for (const Value& v : graph.values) {
    if ((v.kind != "parameter" && v.kind != "buffer") || !v.view.empty()) continue;
    std::string shape;
    for (auto d : v.results[0].shape) shape += std::to_string(d) + ", ";
    std::string tensor = "torch.empty((" + shape + "), dtype=torch." + v.results[0].dtype + ")";
    const std::size_t dot = v.target.rfind('.');
    const std::string owner =
        dot == std::string::npos ? "self" : attribute_expression(v.target.substr(0, dot));
    const std::string name = v.target.substr(dot == std::string::npos ? 0 : dot + 1);
    if (v.kind == "parameter") {
      init += "        " + owner + "." + name + " = nn.Parameter(" + tensor + ")\n";
    } else {
      init += "        " + owner + ".register_buffer(\"" + name + "\", " + tensor + ")\n";
    }
  }
  return init;
}

std::string forward_parameters(const Graph& graph) {
  std::string signature;
  for (const Value& v : graph.values) {
    if (v.kind == "input" && v.view.empty()) signature += ", " + v.name;
  }
  return signature;
}

std::string value_expression(const Value& value) {
  if (!value.view.empty()) return value.view;
  return value.kind == "input" ? value.name : attribute_expression(value.target);
}

const char* const kLayoutMemoInit =
    "        self._layouts = {}  # launch sizes by the inputs' shapes and strides\n";

std::string layout_memo_lines(const std::string& name, const std::string& sizes_call) {
  return "        key = (tuple(t.shape for t in inputs), tuple(t.stride() for t in inputs))\n"
         "        if key not in self._layouts:\n"
         "            self._layouts[key] = " +
         sizes_call +
         "(*key)\n"
         "        " +
         name + " = self._layouts[key]\n";
}

std::string model_class_head(const Graph& graph, const std::vector<int>& reads,
                             const std::string& init_lines) {
  std::string tensors;
  for (int value : reads) tensors += value_expression(graph.values[value]) + ", ";
  return "class ModelNew(nn.Module):\n"
         "    def __init__(self, *init_inputs):\n"
         "        super().__init__()\n" +
         module_state_source(graph) + init_lines +
         "\n"
         "    def forward(self" +
         forward_parameters(graph) +
         "):\n"
         "        inputs = [" +
         tensors + "]\n";
}

}  // namespace cuda_agent::synth
