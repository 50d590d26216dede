/// What the operator families of the library (task/op_library.h) share when they add a step to
/// a chain: reading the current tensor, masks of the axes a pending affine term is constant
/// along, opening a step and costing it. op_library.cpp holds the operators that work element
/// by element (activations, clamp, affine steps, residual add, transpose) and the table;
/// axis_ops.cpp holds those that work along an axis. Internal to the library: task synthesis
/// sees only op_library.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "task/op_library.h"

namespace cuda_agent {
namespace task_synth {

// Reducing over fewer values than this, or scaling fewer features, is not worth a task.
constexpr std::int64_t kMinReducedExtent = 4;

// --- the current tensor ---------------------------------------------------------------------

inline int rank_of(const Chain& c) { return static_cast<int>(c.tensor().dims.size()); }
inline int last_axis(const Chain& c) { return rank_of(c) - 1; }
inline std::int64_t extent_at(const Chain& c, int axis) { return c.extent(c.tensor().dims[axis]); }

/// Whether the chain's last step is one of the named operators.
bool last_op_is(const Chain& c, std::initializer_list<const char*> names);

// --- axis masks of pending affine terms --------------------------------------------------------

inline unsigned all_axes(int rank) { return (1u << rank) - 1; }
inline unsigned all_but(int rank, int axis) { return all_axes(rank) & ~(1u << axis); }

// --- steps ---------------------------------------------------------------------------------------

/// Step number chain->steps.size() + 1, opened: the tensor it produces (a copy of the current one
/// to change) and the step to fill in.
struct Opened {
  TensorState& out;
  Step& step;
  std::string number;
};

Opened open_step(Chain* chain, const std::string& op, std::string summary);

/// Marks the constant behind dim as one that the task's shapes depend on.
inline void pin(Chain* chain, const Dim& dim) {
  if (dim.constant >= 0) chain->constants[dim.constant].pinned = true;
}

/// A pass that reads and writes every element once, like an eager elementwise kernel.
void elementwise_cost(Step* step, std::int64_t elements, int kernels = 1);

// --- the families ------------------------------------------------------------------------------

/// An operator's apply for one that takes no parameters.
inline OpSpec::Apply ignoring_params(void (*apply)(Chain*)) {
  return [apply](const OpParams&, Chain* c) { apply(c); };
}

/// Reductions, softmax and the normalizations, matrix products, convolution and pooling, in the
/// table's order.
std::vector<OpSpec> axis_ops();

}  // namespace task_synth
}  // namespace cuda_agent
