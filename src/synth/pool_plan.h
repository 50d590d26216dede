/// The synthesizer's plan for pooling: one max, average or adaptive average pooling op over 1,
/// 2 or 3 spatial dims, or one depthwise convolution (a window op too: each channel's own
/// filter, weighted), with the elementwise ops before it (a convolution's bias, an
/// activation) computed on each element its windows read, and those after it (a sigmoid, a
/// scale) on each pooled value, in one kernel that writes each output element once. A thread
/// takes one or a few neighbouring output elements of a row (a launch configuration) and walks
/// their windows, reading each element they share once; neighbouring threads read neighbouring
/// windows, which overlap in cache. The index of a thread's row is split into (n, c, d, h) by
/// multiplications, not divisions. What depends only on inputs that are the same along every
/// spatial dim (a batch norm's per-channel scale, 1 / sqrt(var + eps)) is worked out once a
/// thread, before its windows.
///
/// Every tensor is indexed as (N, C, D, H, W): the pooled input's leading dims are N and C (N
/// is 1 for an unbatched input), its spatial dims the last of D, H, W. An input is read through
/// five strides that model_new.py computes from the tensors at run time (0 along a broadcast
/// dim), so one kernel serves any size and any strided view; the output sizes come from torch's
/// formulas, in model_new.py, from the input's sizes and the op's window.
#pragma once

#include <string>
#include <vector>

#include "synth/element_lines.h"
#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct PoolPlan {
  std::string kind;  // "max", "avg", "adaptive_avg" or "depthwise" (a convolution)
  int spatial = 2;   // 1, 2 or 3
  int leading = 2;   // the pooled input's dims before its spatial ones: 1 (C) or 2 (N, C)
  // Per dim of (D, H, W), 1 / 0 where the op has no such dim.
  std::vector<std::int64_t> kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1},
      output_size{1, 1, 1};  // output_size: adaptive pooling's
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::int64_t divisor = 0;    // avg: divisor_override, 0 for none
  int weight = -1, bias = -1;  // depthwise: the filters (C, 1, ...) and the bias (C) or -1
  std::string weight_dtype = "float32";
  std::vector<ElementInput> inputs;  // in kernel argument order, read as in0, in1, ...
  // Per input: whether it holds one value along every spatial dim (a channel's batch-norm
  // statistics, (C, 1, 1)), so that it and the lines of such inputs alone are worked out once a
  // thread, not at every element of its windows or at every output.
  std::vector<bool> constant_in_space;
  std::vector<std::string> before;  // per element read: "const float bK = ...;"
  std::string pooled;               // the variable of the pooling op's operand
  bool pooled_exact = true;         // whether it is torch's float32 value bit for bit
  std::vector<std::string> after;   // per output element: "const float aK = ...;"
  std::string result;               // the variable stored
  std::string output_dtype = "float32";
  std::string pool_dtype = "float32";      // of the pooling op's value
  std::vector<std::string> ops;            // the ops fused, in order
  std::vector<std::int64_t> output_shape;  // at capture: what the tuner classes the task by
};

/// Whether op is a depthwise convolution of a weight the task holds (groups = channels, weight
/// (C, 1, ...)), which the window kernel computes: a pipeline runs it there, not in the library.
bool is_depthwise_convolution(const Graph& graph, const Op& op);

/// The plan for graph, or an InvalidArgument that names each op or argument it cannot take.
Status plan_pool(const Graph& graph, PoolPlan* plan);

/// kernels/fused_pool.cpp ("cpu") or .cu ("cuda"): extern "C" int fused_pool(inputs..., out,
/// int64_t N, C, ID, IH, IW, OD, OH, OW, (s_n, s_c, s_d, s_h, s_w) per input, void* stream).
std::string pool_kernel_source(const PoolPlan& plan, const std::string& device);

/// sa_divider<Ix>, the kernels' division by a number fixed for a launch (defined after SA_FN):
/// for 32-bit indices a multiply-high, an add and a shift, with the magic number found once on
/// the host (the round-up method of Granlund and Montgomery, exact for numerators below 2^31);
/// for 64-bit ones the plain division. quot(x) is x / d for 0 <= x.
std::string divider_source(const std::string& device);

/// model_new.py for the plan.
std::string pool_model_source(const Graph& graph, const PoolPlan& plan);

/// The candidate for graph on device: its files, configurations and tuning keys.
Status synthesize_pool(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
