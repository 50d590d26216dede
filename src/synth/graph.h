/// The kernel synthesizer's input: a task's computation as harness/capture.py records it (graph
/// IR schema cuda-agent.graph/1, an aten-level torch.export graph), read into typed values and
/// ops, each op classified by the part of the synthesizer that handles it. An op no part handles
/// is listed by name, never guessed at.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/graph_ir.h"
#include "util/status.h"

namespace cuda_agent::synth {

enum class OpClass {
  kElementwise,    // unary, binary with broadcasting, with scalars: relu, add, mul, clamp, ...
  kReduction,      // over dims: sum, mean, amax, amin, max/min with indices, logsumexp, norms
  kSoftmax,        // softmax, log_softmax
  kNormalization,  // layer, group, batch, instance, RMS
  kGemm,           // linear, matmul, mm, bmm, addmm, baddbmm
  kConvolution,    // conv1d/2d/3d and transposed convolutions (cuDNN)
  kPooling,        // max, average and adaptive average pooling
  kScan,           // cumsum, cumprod; arange (positions along the scanned dim), flip
  kLayout,         // views and data movement: view, reshape, transpose, permute, getitem, ...
  kUnsupported,
};

const char* op_class_name(OpClass c);

OpClass classify_op(const std::string& base_name);

struct TensorType {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
  std::string dtype;  // "float32", "bfloat16", "int64", ...
};

struct Value {
  std::string name;
  std::string kind;                 // "input", "parameter", "buffer", "constant" or "op"
  std::string target;               // a parameter's or buffer's attribute path ("linear.weight")
  std::vector<TensorType> results;  // one per result; empty for a non-tensor (a scalar, None)
  int op = -1;                      // index of the op that makes it, for kind "op"
  // A view of an input, parameter or buffer that a rewrite made: the Python expression that
  // makes it in ModelNew.forward ("d.unsqueeze(-1)"); empty for the task's own values.
  std::string view;
  // Where view is shape calls (view, unsqueeze, unflatten) after another value's expression:
  // that value's name ("d"), whose expression view starts with; empty otherwise.
  std::string view_root;
};

struct Op {
  std::string target;  // "aten.linear.default"
  std::string name;    // op_base_name(target)
  OpClass op_class = OpClass::kUnsupported;
  std::vector<int> inputs;  // indices of the values its arguments name, in order
  nlohmann::json args;      // as recorded: a value is {"ref": name}
  nlohmann::json kwargs;
  int value = -1;  // the value it makes
};

struct Graph {
  std::vector<Value> values;  // inputs first, then one per op, in the order they are computed
  std::vector<Op> ops;
  std::vector<int> outputs;  // value indices
  // A view ModelNew applies to each output it returns (".flatten(1, 2)" where a rewrite split
  // a dim), empty for none.
  std::string output_view;

  /// Index of the value with this name, or -1.
  int find(const std::string& name) const;
  /// The distinct names of ops classified kUnsupported, sorted.
  std::vector<std::string> unsupported_ops() const;
};

/// The strides of a tensor of shape in contiguous memory, in elements.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

/// A layout op that only makes a view (no data moves), and so runs as a Python step: the guard
/// lets views through. contiguous, clone, cat and stack copy: they belong in a kernel, or nowhere.
bool is_view_op(const Op& op);

/// Reads a cuda-agent.graph/1 document. Another schema, a value named twice, an argument that
/// names no earlier value, or an output that names no value is an InvalidArgument saying which.
Status read_graph(const nlohmann::json& document, Graph* graph);

}  // namespace cuda_agent::synth
