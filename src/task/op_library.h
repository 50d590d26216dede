/// The typed operator library that task synthesis (task/synth.h) composes. Each operator states
/// what it needs of the tensor it is applied to (rank, sizes, divisibility, what came just before
/// it), how it changes the tensor's sizes and a sketch of its values (task/value_sketch.h), which
/// weights it creates in __init__ and the expression it adds to forward. The synthesizer uses this
/// to draw only valid compositions, to refuse degenerate ones (an output near zero or near
/// constant, a weight that a later normalization cancels, an operator that does nothing), and to
/// estimate what each composition costs so that its sizes suit the H200.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "task/value_sketch.h"

namespace cuda_agent {
namespace task_synth {

/// A module-level size constant of a synthesized task file.
struct SizeConstant {
  std::string name;
  std::int64_t value = 0;
  bool batch_like = false;  // may shrink (SCALABLE_SIZES) unless an operator pins it
  bool pinned = false;      // a weight shape, a divisibility or a normalized extent depends on it
};

/// One dimension of a tensor: a size constant divided by a power of two (pooling halves sizes).
struct Dim {
  int constant = 0;  // index into Chain::constants; -1 for a kept size-1 axis
  std::int64_t divisor = 1;
  bool operator==(const Dim&) const = default;
};

/// A term an earlier operator added or multiplied in, constant along some axes. A later
/// normalization over axes that all lie in const_axes cancels it, and with it the weights that
/// made it; the library refuses such a normalization.
struct AffineTerm {
  bool additive = false;    // else multiplicative
  unsigned const_axes = 0;  // bit i: the term is constant along axis i
};

/// What the synthesizer knows about the tensor flowing through a chain of operators.
struct TensorState {
  std::vector<Dim> dims;
  Values values;
  bool nonnegative = false;  // relu, abs, elu, leaky_relu would change nothing
  // Shares of values sitting on an upper or a lower bound (a clamp's, relu's zero), which a later
  // max or min would return whatever the input. Kept through per-position affine steps, which
  // move a bound per channel or feature but leave it a bound.
  double top_pile = 0;
  double bottom_pile = 0;
  int fixed_sum_axis = -1;  // an axis whose sums are constants (softmax, layer norm); -1: none
  std::vector<AffineTerm> pending;
  bool closed = false;  // too small for more operators: the chain ends here
};

/// One operator applied: what it adds to the task file and to the cost estimate. Costs are per
/// unit of the batch constant, which the synthesizer sets last.
struct Step {
  std::string op;                       // the operator's name
  std::string summary;                  // a line of Model's docstring
  std::string expr;                     // forward's expression of x
  std::string signature;                // op and structural parameters, for telling tasks apart
  std::vector<std::string> init_lines;  // statements of __init__
  std::vector<int> init_constants;      // size constants __init__ needs as arguments
  int skip_source = -1;                 // residual add: the history entry it adds
  double unit_bytes = 0;                // memory traffic
  double fixed_bytes = 0;               // traffic that does not grow with the batch (weights)
  double unit_gemm_flops = 0;           // fp32 matrix products (no TF32 by default)
  double unit_conv_flops = 0;           // convolutions (cuDNN takes TF32 by default)
  int kernels = 1;                      // launches in eager PyTorch
  bool can_end = true;                  // may be the composition's last operator
};

/// A composition in progress: the task's sizes, the tensor after each step, and the steps.
struct Chain {
  std::vector<SizeConstant> constants;  // constants[0] is the batch, 1 while the chain grows
  std::vector<TensorState> history;     // history[0] is the input, history[k] follows step k
  std::vector<Step> steps;
  double input_offset = 0;  // get_inputs() draws randn * input_scale + input_offset
  double input_scale = 1;

  const TensorState& tensor() const { return history.back(); }
  std::int64_t extent(const Dim& dim) const;
  /// The Python expression of a dimension's size, e.g. "width // 2".
  std::string size_expr(const Dim& dim) const;
  /// Elements of the current tensor per unit of the batch.
  std::int64_t elements() const;
  /// Adds a constant named base (or base2, base3, ... when taken) and returns its index.
  int add_constant(const std::string& base, std::int64_t value);
};

/// The choices an operator makes beyond its name (which axis, which size, which bounds).
struct OpParams {
  int axis = -1;
  bool keepdim = false;
  std::int64_t size = 0;
  double low = 0;
  double high = 0;
  int source = -1;
};

struct OpSpec {
  using Variants = std::function<std::vector<OpParams>(const Chain&)>;
  using Apply = std::function<void(const OpParams&, Chain*)>;

  std::string name;
  int weight = 1;  // how often it is drawn, relative to the others
  /// The ways the operator can apply to the chain's current tensor: none when its
  /// requirements do not hold.
  Variants variants;
  /// Appends the step and the tensor it produces to the chain.
  Apply apply;
};

/// Every operator the synthesizer composes, in a fixed order.
const std::vector<OpSpec>& op_library();

/// A float literal as Python writes it ("2.0", "0.25", "1e-05"); the library's values come
/// from small grids of binary fractions, which %g prints exactly.
std::string python_float(double v);

}  // namespace task_synth
}  // namespace cuda_agent
