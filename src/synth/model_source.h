/// The parts of a generated model_new.py that every plan shares: ModelNew holds parameters and
/// buffers of the same names and shapes as the task's Model (so the reference's weights load
/// into it), forward takes the task's inputs by their names, and each graph value the kernel
/// reads is named by the Python expression that holds it.
#pragma once

#include <string>
#include <vector>

#include "synth/graph.h"
#include "synth/tuning.h"

namespace cuda_agent::synth {

/// The lines of ModelNew.__init__ after super().__init__(), indented 8 spaces: submodules,
/// nn.Parameter and register_buffer calls at each parameter's and buffer's attribute path.
std::string module_state_source(const Graph& graph);

/// ", x, y": the task's inputs, in order, for forward's signature.
std::string forward_parameters(const Graph& graph);

/// The Python expression of an input, parameter or buffer value: "x" or "self.linear.weight".
std::string value_expression(const Value& value);

/// The head of a one-kernel plan's ModelNew: the class, its state, forward's signature, and
/// forward's first line, `inputs = [...]`, the expressions of the values read (graph indices),
/// in kernel argument order; init_lines, more of __init__. The plan writes the rest of forward
/// after it.
/// viewed: a read that is a view a rewrite made (value.view_root) is made without a view op,
/// by synth_piece.viewed, for a kernel whose caller reads only a tensor's shape, strides,
/// dtype, device and address (the model imports synth_piece; see reads_views).
/// more_parameters: forward's parameters after the task's inputs (", out=None").
std::string model_class_head(const Graph& graph, const std::vector<int>& reads,
                             const std::string& init_lines = "", bool viewed = false,
                             const std::string& more_parameters = "");

/// The expression of value made without a view op where it is a rewrite's view of a root
/// value ("synth_piece.viewed(self.bias).view(-1, 1, 1)"), value_expression otherwise.
std::string viewed_expression(const Graph& graph, const Value& value);

/// Whether any of the values read is a rewrite's view (one viewed_expression makes).
bool reads_views(const Graph& graph, const std::vector<int>& reads);

/// synth_piece.py: pieces of splits and chunks, and Viewed tensors, made without view ops.
extern const char* const kPieceModule;

/// The line of __init__ that starts a caller's memo of its kernel's launch sizes, keyed by the
/// inputs' shapes and strides (layout arithmetic costs tens of microseconds a call, more than a
/// small kernel of a loop runs on the GPU), and forward's lines that read it, computing
/// `sizes_call` (a function of the key's two tuples, and of more_key's value where one is
/// given: a Python expression forward has bound) where the key is new; they bind `name`.
extern const char* const kLayoutMemoInit;
std::string layout_memo_lines(const std::string& name, const std::string& sizes_call,
                              const std::string& more_key = "");

/// A kernel source with each `extern "C" int NAME(...)` entry (not NAME_config) whose
/// parameters are pointers and integers also defined as `NAME_packed(const int64_t* words)`, the
/// same arguments as 64-bit words in order, which utils/kernels.py's bind() calls with one
/// pointer rather than converting each argument through ctypes (a third of a microsecond
/// apiece: 15 us a call of a 70-argument gate kernel on the CI machine).
std::string with_packed_entries(const std::string& source);

/// with_packed_entries over every kernels/ source of candidate and its fallbacks.
void add_packed_entries(Candidate* candidate);

}  // namespace cuda_agent::synth
