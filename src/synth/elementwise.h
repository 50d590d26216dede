/// The synthesizer's first plan: a task whose whole computation is a chain of elementwise ops
/// (unary, binary with broadcasting, with scalars) becomes one fused kernel that reads each input
/// once and writes the output once, and a model_new.py that calls it. Kernels are generated for
/// the CPU (C++ with OpenMP) and for CUDA (the output in small tiles, a tile a block, each thread
/// loading one 16-byte vector of every full-size input before it computes, or four where the
/// body is costly) from the same expression.
///
/// Broadcasting is general over the shapes a fused chain meets: an input whose sizes, aligned to
/// the output's from the right, are 1 except for one run of the output's own sizes is read at
/// (i / inner) % count, where count is its number of elements and inner the product of the
/// output's sizes after that run (a per-feature bias, a per-channel scale, a scalar tensor).
/// inner and count are computed from the tensors' shapes at run time, so one kernel serves any
/// size.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct ElementwisePlan {
  std::vector<int> inputs;         // graph values read by the kernel, in argument order
  std::vector<std::string> lines;  // the per-element body: one `const float vK = ...;` per op
  std::string result;              // the variable holding the output
  std::vector<std::string> ops;    // the ops fused, in order ("relu", "add", ...)
  std::vector<std::int64_t> output_shape;
  std::vector<std::string> input_dtypes;  // per input: float32, bfloat16 or float16
  std::vector<bool> input_full;           // per input: of the output's shape (never broadcast)
  std::vector<std::vector<std::int64_t>> input_shapes;
  std::vector<int> input_groups;  // per input: the runs of rows the kernel walks it in
  /// Per line: whether it reads only broadcast inputs and lines that do, so that where each of
  /// per_row_inputs is one element a row (step 0) it has one value a row, computed once.
  std::vector<bool> line_per_row;
  std::vector<int> per_row_inputs;  // positions in inputs, ascending
  std::string output_dtype = "float32";
};

/// The plan for graph, or an InvalidArgument that names each op, dtype or broadcast the plan
/// cannot take (those are left to the synthesizer's other plans).
Status plan_elementwise(const Graph& graph, ElementwisePlan* plan);

/// How the kernel walks a tensor as rows, as model_new.py's rows_of does on its strides: cols,
/// the elements of a row, where it is a view whose trailing dims are contiguous (0 where its
/// memory is contiguous or its strides were not recorded; -1 where its last dim is not
/// contiguous); groups, the runs of evenly spaced rows its leading dims make (a slice, a chunk,
/// a select or a narrow of a contiguous tensor: one; heads transposed out of a projection:
/// two); pitch, the spacing of the innermost run's rows. The kernel reads a view of the
/// output's shape in place in up to kMaxRowGroups runs, and writes its result into a view of
/// one run whose rows do not overlap; all of a call's views must have rows of one length.
struct ElementwiseWalk {
  std::int64_t cols = 0;
  int groups = 1;
  std::int64_t pitch = 0;
};
ElementwiseWalk elementwise_walk(const TensorType& t);
constexpr int kMaxRowGroups = 3;

/// Whether the kernel reads input k of plan, a broadcast one of type t, in place: its dims that
/// are not 1 are one run of evenly spaced elements (model_new.py's run_of), one a row, constant
/// along rows of cols elements (any rows where cols is 0): a column of a matrix, say, that
/// gates each row of the output.
bool elementwise_reads_broadcast_in_place(const ElementwisePlan& plan, std::size_t k,
                                          const TensorType& t, std::int64_t cols);

/// Whether rows of cols elements suit every input of plan, as model_new.py's row_layout lays
/// them out: one of the output's shape, any; a broadcast one, where it is constant along a row
/// or runs along the whole of it (a per-channel bias does not, for rows of channels).
bool elementwise_rows_fit(const ElementwisePlan& plan, std::int64_t cols);

/// The kernel source, kernels/fused_elementwise.cpp ("cpu") or .cu ("cuda"), whose entry is
/// extern "C" int fused_elementwise(inputs..., out, int64_t rows, int64_t cols, int64_t
/// out_pitch, per input (int64_t div, mod, step, pitch, then div, mod and stride of each further
/// run of its rows: input_groups), void* stream).
std::string elementwise_kernel_source(const ElementwisePlan& plan, const std::string& device);

/// model_new.py for the plan: ModelNew holds parameters and buffers of the same names and shapes
/// as the task's Model (so the reference's weights load into it) and calls the kernel.
std::string elementwise_model_source(const Graph& graph, const ElementwisePlan& plan);

/// The candidate for graph on device: its files by path relative to the workspace, its launch
/// configurations (CUDA: threads per block; CPU: OpenMP schedules) and its tuning keys.
Status synthesize_elementwise(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
