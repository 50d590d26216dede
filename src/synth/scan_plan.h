/// The synthesizer's plan for a cumulative sum or product: torch.cumsum or torch.cumprod along
/// one dim, with the elementwise ops before it (on each element it reads) and after it (on each
/// running value) in one kernel that reads and writes each element once. Positions along the
/// scanned dim (torch.arange over it, a running mean's counts) are the kernel's own index, not a
/// tensor. A scan of a flip whose result is flipped back along the same dim (a reverse cumulative
/// sum) scans each row from its end, and neither flip is a pass over memory.
///
/// The iteration space is the scanned shape F, padded on the left to 6 dims; a row is one
/// position of every dim but the scanned one. On CUDA a block takes a row, in tiles of blockDim
/// x V elements: each warp reads its 32 x V part striped into shared memory, each thread scans
/// V neighbouring elements, the block scans the threads' totals (warp shuffles, then across
/// warps through shared memory), and a carry takes each tile's total to the next. Where the
/// scanned dim is not F's last and the dims after it hold 8 elements or more, neighbouring rows
/// lie side by side in memory, and reading along one row would take a 32-byte sector for each
/// element: there a block takes 32 neighbouring rows instead, a lane each, so that a warp reads
/// 32 neighbours at every step; each warp scans V elements of each of the 32 rows, and the warps'
/// totals are combined through shared memory. On the CPU
/// each thread takes whole rows. Every input is read through 6 strides that model_new.py
/// computes from the tensors at run time (0 along a broadcast dim), so one kernel serves any
/// size and any strided view.
#pragma once

#include <string>
#include <vector>

#include "synth/element_lines.h"
#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct ScanPlan {
  int rank = 0;          // of F
  int axis = 0;          // the scanned dim of F
  bool product = false;  // cumprod: the running value is a product, not a sum
  bool reverse = false;  // flip, scan, flip along the dim: each row scanned from its end
  bool across = false;   // CUDA: a lane a row, 32 neighbouring rows a block (see above)
  std::vector<ElementInput> inputs;  // in kernel argument order, read as in0, in1, ...
  std::vector<std::string> before;   // per element read: "const float bK = ...;"
  std::string scanned;               // the variable of the scan's operand
  std::vector<std::string> after;    // per element written: "const float aK = ...;"
  std::string result;                // the variable stored
  std::string output_dtype = "float32";
  std::vector<std::string> ops;     // the ops fused, in order
  std::vector<std::int64_t> shape;  // F at capture: what the tuner classes the task by
};

/// The plan for graph, or an InvalidArgument that names each op or argument it cannot take.
Status plan_scan(const Graph& graph, ScanPlan* plan);

/// kernels/fused_scan.cpp ("cpu") or .cu ("cuda"): extern "C" int fused_scan(inputs..., out,
/// int64_t s0..s5 (F's sizes, padded to 6 dims), (6 strides) per input, void* stream).
std::string scan_kernel_source(const ScanPlan& plan, const std::string& device);

/// model_new.py for the plan.
std::string scan_model_source(const Graph& graph, const ScanPlan& plan);

/// The candidate for graph on device: its files, configurations and tuning keys.
Status synthesize_scan(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
