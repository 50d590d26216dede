#include "util/graph_ir.h"

namespace cuda_agent {

std::string op_base_name(const std::string& target) {
  static const std::string kAten = "aten.", kOperator = "operator.";
  if (target.rfind(kAten, 0) == 0) {
    std::string name = target.substr(kAten.size());
    return name.substr(0, name.find('.'));  // drop the overload ("default", "Tensor", ...)
  }
  if (target.rfind(kOperator, 0) == 0) return target.substr(kOperator.size());
  return target;
}

void collect_value_refs(const nlohmann::json& arguments, std::vector<std::string>* refs) {
  if (arguments.is_object()) {
    auto ref = arguments.find("ref");
    if (ref != arguments.end() && ref->is_string()) {
      refs->push_back(ref->get<std::string>());
      return;
    }
    for (const auto& [key, item] : arguments.items()) collect_value_refs(item, refs);
  } else if (arguments.is_array()) {
    for (const auto& item : arguments) collect_value_refs(item, refs);
  }
}

}  // namespace cuda_agent
