/// The synthesizer's plan for tasks that reduce rows: elementwise ops before and after, and any
/// number of reductions (sum, mean, max, min with or without indices, argmax, argmin,
/// logsumexp, vector norms, std, var), softmax and log-softmax, and layer, RMS and instance
/// normalisation, all over the same dims, fused into one kernel that walks each row in as many
/// passes as the data flow needs (softmax: the maximum, then the sum of exponentials, then the
/// output) and writes each output once. Mean and variance (the norms, var, std) come in one
/// pass: each thread's moments about a value of its own, merged pairwise.
///
/// The iteration space is the shape F of the values the first reduction reads, seen as
/// (outer, reduced, inner): the reduced dims D are one run of F's dims, a row is one (outer,
/// inner) pair, and its elements lie inner apart. Every value is either per element (it varies
/// along D) or per row. An input is read through a (div, mod, stride) per group of dims, which
/// model_new.py computes from the tensors' sizes at run time, so one kernel serves any size.
///
/// On CUDA the rows are walked one of five ways, by what the sizes and addresses allow at run
/// time: cached (a contiguous, 16-byte-aligned row of up to 32768 elements read once, 16 bytes
/// at a time, into registers that every pass reads; a warp or a block a row), clustered (such a
/// row too long for the registers, on sm_90: a cluster of blocks a row, each reading its
/// segment once, 16 bytes at a time, into shared memory that the later passes read, partial
/// results meeting through distributed shared memory), streamed (a block a row, 16 bytes at a
/// time, once per pass), quads (rows inner apart, 4 | inner: a thread takes four neighbouring
/// rows, element k of all four one 16-byte load, and computes each op per lane; a block takes
/// TX quads side by side, TY threads splitting each) or strided (any rows: a block takes TX rows
/// side by side, so that a warp reads consecutive addresses when rows are strided, and TY
/// threads split each row, element by element).
/// Partial results meet by warp shuffles and shared memory. Each walk's block shapes are
/// launch configurations the tuner times (row_configs). On the CPU (OpenMP) each thread takes
/// whole rows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct RowInput {
  int value = -1;            // the graph value (an input, parameter or buffer)
  std::vector<int> dims;     // the dim of F each of its dims lands on
  bool per_element = false;  // it varies along the reduced dims
  // Per element but broadcast along some of them (a group norm's per-channel weight in a row
  // of channels and pixels): element k is read at ((k / div_r) % mod_r) * step. The walks that
  // read 4 elements at a time (cached, streamed) take it where 4 | div_r, one load a run of 4;
  // the quad walk does not.
  bool segmented = false;
  std::int64_t run = 1;  // segmented: div_r at capture, the elements a value holds for in a row
  bool per_row = true;   // it varies from row to row (a norm's weight does not)
  std::string dtype = "float32";  // float32, bfloat16 or float16; read as float32
};

struct RowAccumulator {
  std::string name;     // "a0": the row's result after its pass (and "a0_i", an index)
  std::string kind;     // "sum", "max", "min", "argmax" or "argmin"
  std::string operand;  // the per-element variable it reduces
  int pass = 1;         // the pass over the row that computes it, from 1
};

struct RowLine {
  bool per_element = false;
  int level = 0;     // per element: computable in passes after this one; per row: after this pass
  std::string text;  // "const <type> <name> = <expression>;"
  std::string name;  // the variable it defines
  std::string type;  // float or int64_t
};

struct RowOutput {
  int value = -1;
  bool per_element = false;
  bool keepdim = false;  // a per-row output keeps the reduced dims as size 1
  bool index = false;    // int64 indices rather than floating-point values
  std::string variable;
  std::string dtype = "float32";  // of the tensor written: float32, bfloat16, float16 or int64
};

struct RowPlan {
  int rank = 0;                             // of F
  int first_reduced = 0, last_reduced = 0;  // D: F's dims first..last
  std::vector<RowInput> inputs;             // in kernel argument order, read as in0, in1, ...
  std::vector<RowLine> lines;               // in an order that computes each value before its use
  std::vector<RowAccumulator> accumulators;
  std::vector<RowOutput> outputs;
  int passes = 0;
  std::vector<std::string> ops;     // the ops fused, in order
  std::vector<std::int64_t> sizes;  // F's sizes at capture: what the tuner classes the task by
};

/// The plan for graph, or an InvalidArgument that names each op, dtype, dim or broadcast the
/// plan cannot take.
Status plan_rows(const Graph& graph, RowPlan* plan);

/// Whether the kernel reads input k of the plan in place when it has type t: where its dims in
/// each group (outer, reduced, inner) are one run of memory, as model_new.py's row_layout
/// requires at run time (a slice, a chunk or a select of a contiguous tensor, say).
bool rows_read_in_place(const RowPlan& plan, std::size_t k, const TensorType& t);

/// kernels/fused_rows.cpp ("cpu") or .cu ("cuda"): extern "C" int fused_rows(inputs...,
/// outputs..., int64_t O, int64_t R, int64_t I, (div_o, mod_o, stride_o, div_i, mod_i, stride_i,
/// step) per input, (div_r, mod_r) per segmented input, void* stream).
std::string row_kernel_source(const RowPlan& plan, const std::string& device);

/// model_new.py for the plan.
std::string row_model_source(const Graph& graph, const RowPlan& plan);

/// The launch configurations worth timing for the plan's rows on device, the default first.
std::vector<KernelConfig> row_configs(const RowPlan& plan, const std::string& device);

/// The candidate for graph on device: its files by path relative to the workspace, its
/// configurations and its tuning keys.
Status synthesize_rows(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
