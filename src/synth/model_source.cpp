#include "synth/model_source.h"

#include <set>

namespace cuda_agent::synth {

std::string module_state_source(const Graph& graph) {
  std::string init;
  std::set<std::string> modules;
  for (const Value& v : graph.values) {
    if ((v.kind != "parameter" && v.kind != "buffer") || !v.view.empty()) continue;
    std::string path = v.target, owner = "self";
    for (std::size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.')) {
      std::string child = owner + "." + path.substr(0, dot);
      if (modules.insert(child).second) init += "        " + child + " = nn.Module()\n";
      owner = child;
      path = path.substr(dot + 1);
    }
    std::string shape;
    for (auto d : v.results[0].shape) shape += std::to_string(d) + ", ";
    std::string tensor = "torch.empty((" + shape + "), dtype=torch." + v.results[0].dtype + ")";
    if (v.kind == "parameter") {
      init += "        " + owner + "." + path + " = nn.Parameter(" + tensor + ")\n";
    } else {
      init += "        " + owner + ".register_buffer(\"" + path + "\", " + tensor + ")\n";
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
  return value.kind == "input" ? value.name : "self." + value.target;
}

}  // namespace cuda_agent::synth
