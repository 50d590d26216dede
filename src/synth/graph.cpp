#include "synth/graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace cuda_agent::synth {
namespace {

const std::unordered_map<std::string, OpClass>& op_classes() {
  static const auto* classes = [] {
    auto* m = new std::unordered_map<std::string, OpClass>();
    auto add = [m](OpClass c, std::initializer_list<const char*> names) {
      for (const char* n : names) (*m)[n] = c;
    };
    add(OpClass::kElementwise,
        {"relu",       "relu6",    "leaky_relu",  "gelu",        "silu",
         "sigmoid",    "tanh",     "hardswish",   "hardsigmoid", "elu",
         "selu",       "softplus", "mish",        "abs",         "neg",
         "exp",        "log",      "log1p",       "sqrt",        "rsqrt",
         "reciprocal", "sin",      "cos",         "erf",         "square",
         "pow",        "clamp",    "clamp_min",   "clamp_max",   "add",
         "sub",        "rsub",     "mul",         "div",         "maximum",
         "minimum",    "where",    "masked_fill", "to",          "_to_copy",
         "type_as",    "lerp",     "hardtanh",    "sign",        "smooth_l1_loss",
         "kl_div",     "eq",       "ne",          "lt",          "le",
         "gt",         "ge"});
    add(OpClass::kReduction, {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin",
                              "logsumexp", "norm", "linalg_vector_norm", "var", "std", "prod"});
    add(OpClass::kSoftmax, {"softmax", "log_softmax", "_softmax", "_log_softmax"});
    add(OpClass::kNormalization,
        {"layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "native_layer_norm",
         "native_group_norm", "_native_batch_norm_legit_no_training"});
    add(OpClass::kGemm, {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm"});
    add(OpClass::kConvolution, {"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d",
                                "conv_transpose2d", "conv_transpose3d"});
    add(OpClass::kScan, {"cumsum", "cumprod", "arange", "flip"});
    add(OpClass::kPooling,
        {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
         "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"});
    add(OpClass::kLayout,
        {"view",          "reshape",        "_unsafe_view", "flatten", "t",      "unflatten",
         "transpose",     "permute",        "unsqueeze",    "squeeze", "expand", "expand_as",
         "contiguous",    "clone",          "alias",        "detach",  "select", "slice",
         "chunk",         "split",          "unbind",       "getitem", "cat",    "stack",
         "pixel_shuffle", "pixel_unshuffle"});
    return m;
  }();
  return *classes;
}

std::vector<std::int64_t> int_list(const nlohmann::json& value) {
  std::vector<std::int64_t> out;
  if (!value.is_array()) return out;
  for (const auto& v : value) out.push_back(v.is_number_integer() ? v.get<std::int64_t>() : -1);
  return out;
}

/// The result types of a value: "shape" is a list of sizes for one tensor, a list of such lists
/// (with "dtype" a list too) for several, null for a non-tensor.
std::vector<TensorType> result_types(const nlohmann::json& entry) {
  std::vector<TensorType> results;
  const auto& shape = entry.contains("shape") ? entry["shape"] : nlohmann::json();
  const auto& stride = entry.contains("stride") ? entry["stride"] : nlohmann::json();
  const auto& dtype = entry.contains("dtype") ? entry["dtype"] : nlohmann::json();
  if (!shape.is_array()) return results;
  bool several = !shape.empty() && (shape[0].is_array() || shape[0].is_null());
  if (!several) {
    results.push_back(
        {int_list(shape), int_list(stride), dtype.is_string() ? dtype.get<std::string>() : ""});
    return results;
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    TensorType t;
    t.shape = int_list(shape[i]);
    if (stride.is_array() && i < stride.size()) t.stride = int_list(stride[i]);
    if (dtype.is_array() && i < dtype.size() && dtype[i].is_string()) t.dtype = dtype[i];
    results.push_back(std::move(t));
  }
  return results;
}

std::string text(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

bool is_view_op(const Op& op) {
  static const std::set<std::string> names = {
      "view",    "_unsafe_view", "reshape", "flatten", "t",      "unflatten", "transpose",
      "permute", "unsqueeze",    "squeeze", "expand",  "alias",  "detach",    "select",
      "slice",   "chunk",        "split",   "unbind",  "getitem"};
  return op.op_class == OpClass::kLayout && names.count(op.name);
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kReduction:
      return "reduction";
    case OpClass::kSoftmax:
      return "softmax";
    case OpClass::kNormalization:
      return "normalization";
    case OpClass::kGemm:
      return "gemm";
    case OpClass::kConvolution:
      return "convolution";
    case OpClass::kPooling:
      return "pooling";
    case OpClass::kScan:
      return "scan";
    case OpClass::kLayout:
      return "layout";
    case OpClass::kUnsupported:
      return "unsupported";
  }
  return "unsupported";
}

OpClass classify_op(const std::string& base_name) {
  const auto& classes = op_classes();
  auto it = classes.find(base_name);
  return it == classes.end() ? OpClass::kUnsupported : it->second;
}

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> stride(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  return stride;
}

int Graph::find(const std::string& name) const {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Graph::unsupported_ops() const {
  std::set<std::string> names;
  for (const Op& op : ops) {
    if (op.op_class == OpClass::kUnsupported) names.insert(op.target);
  }
  return {names.begin(), names.end()};
}

Status read_graph(const nlohmann::json& document, Graph* graph) {
  if (!document.is_object() || text(document, "schema") != kGraphIrSchema) {
    return Status::InvalidArgument(std::string("not a graph IR document (schema ") +
                                   kGraphIrSchema + " expected)");
  }
  Graph read;
  std::map<std::string, int> index;
  auto add_value = [&](Value value) -> Status {
    if (value.name.empty()) return Status::InvalidArgument("a value of the graph has no name");
    if (!index.emplace(value.name, static_cast<int>(read.values.size())).second) {
      return Status::InvalidArgument("the graph names two values " + value.name);
    }
    read.values.push_back(std::move(value));
    return Status::OK();
  };
  for (const auto& input : document.value("inputs", nlohmann::json::array())) {
    Value v{text(input, "name"),
            text(input, "kind"),
            text(input, "target"),
            result_types(input),
            -1,
            "",
            ""};
    if (v.kind.empty()) v.kind = "input";
    if (Status s = add_value(std::move(v)); !s.ok()) return s;
  }
  for (const auto& node : document.value("nodes", nlohmann::json::array())) {
    Op op;
    op.target = text(node, "op");
    op.name = op_base_name(op.target);
    op.op_class = classify_op(op.name);
    op.args = node.value("args", nlohmann::json::array());
    op.kwargs = node.value("kwargs", nlohmann::json::object());
    std::vector<std::string> refs;
    collect_value_refs(op.args, &refs);
    collect_value_refs(op.kwargs, &refs);
    for (const std::string& ref : refs) {
      auto it = index.find(ref);
      if (it == index.end()) {
        return Status::InvalidArgument("op " + text(node, "name") + " (" + op.target + ") uses " +
                                       ref + ", which no earlier value is");
      }
      op.inputs.push_back(it->second);
    }
    op.value = static_cast<int>(read.values.size());
    Value v{text(node, "name"),
            "op",
            "",
            result_types(node),
            static_cast<int>(read.ops.size()),
            "",
            ""};
    if (Status s = add_value(std::move(v)); !s.ok()) return s;
    read.ops.push_back(std::move(op));
  }
  for (const auto& output : document.value("outputs", nlohmann::json::array())) {
    auto it = output.is_string() ? index.find(output.get<std::string>()) : index.end();
    if (it == index.end()) {
      return Status::InvalidArgument("the graph's output " + output.dump() + " is no value");
    }
    read.outputs.push_back(it->second);
  }
  *graph = std::move(read);
  return Status::OK();
}

}  // namespace cuda_agent::synth
