/// The synthesizer's plan for attention written out: softmax(f(Q @ K^T)) @ V over the last dim,
/// where f is any chain of elementwise ops of the scores (a scale, a masked_fill by a mask, an
/// additive bias; each further operand a scalar or a tensor that broadcasts to the scores), in
/// float16 or bfloat16. Eager torch writes the (query x key) score matrix and reads and writes
/// it once per op of f, the softmax and the second GEMM; the fused kernel keeps a block of
/// queries' scores on chip and never writes them.
///
/// On CUDA (sm_80 and later) the kernel is flash attention's: a block takes 128 queries of one
/// (batch, head), a warp 32 of them, where the head dims are at most 64 (each key and value
/// fragment read from shared memory then feeds two products), else 64 and 16; it walks the
/// keys 64 at a time; configurations 1 and 2 set 16 or 32 queries a warp. Both products run on the
/// tensor cores (mma.sync m16n8k16, float32 accumulators); a row's maximum and sum are carried
/// along the keys (an online softmax), the output rescaled as the maximum grows, and each
/// product's scores become the second product's operand in registers. The next step's keys
/// and values are on their way into shared memory (cp.async) while the warps compute on this
/// step's, and a step whose keys f's final masked_fill by -inf hides from every query of the
/// block (a causal mask's future) is skipped. The head dim is a compile-time constant (a
/// multiple of 16, up to 128); batch and sequence lengths are the kernel's arguments. Q, K, V and
/// the tensors of f are read through strides (a transposed view in place, 0 along a broadcast dim),
/// 16 bytes at a time where the layout allows. On the CPU (OpenMP) a thread takes a query row: its
/// scores in float32, then the softmax and the sum.
///
/// The pipeline (pipeline.h) runs each such group of ops as a step of its own.
#pragma once

#include <string>
#include <vector>

#include "synth/element_lines.h"
#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

/// The ops of one attention in a graph, by index: the first GEMM, f's ops in order, the
/// softmax and the second GEMM.
struct AttentionOps {
  int scores = -1;         // Q @ K^T (matmul or bmm)
  std::vector<int> chain;  // f, in the order the graph computes it
  int softmax = -1;
  int output = -1;  // softmax(...) @ V

  /// All of them, in the graph's order.
  std::vector<int> all() const;
};

/// Whether the softmax op at index softmax in graph is the middle of an attention whose
/// intermediate values (scores, f's results, probabilities) nothing else reads and the task
/// does not return; if so, its ops. *why says why not, for a refusal.
bool match_attention(const Graph& graph, int softmax, AttentionOps* ops, std::string* why);

struct AttentionPlan {
  int q = -1, kt = -1, v = -1;       // the graph values read: Q, K^T (as the GEMM reads it), V
  std::vector<ElementInput> inputs;  // f's tensors, read as in0, in1, ... at a score's position
  std::vector<std::string> lines;    // f: "const float bK = ...;" of the score s
  std::string score = "s";           // f's result
  std::vector<std::string> ops;      // the ops' names, for people
  std::string dtype;                 // float16 or bfloat16: Q, K, V and the output
  std::int64_t head_dim = 0;         // Q's and K's last dim
  std::int64_t value_dim = 0;        // V's and the output's
  int batch_rank = 0;                // dims of the scores before the last two: 0, 1 or 2
  // Where f ends in masked_fill(x, mask, -inf) of a bool input (a causal mask): that input's
  // index in inputs, else -1. A step whose keys the mask hides from all of a block's queries
  // adds nothing to their sums, and the CUDA kernel skips its products.
  int mask = -1;
};

/// The plan for a graph that is one attention and nothing else (a pipeline step's graph), or an
/// InvalidArgument saying why not.
Status plan_attention(const Graph& graph, AttentionPlan* plan);

std::string attention_kernel_source(const AttentionPlan& plan, const std::string& device);
std::string attention_model_source(const Graph& graph, const AttentionPlan& plan);

/// model_new.py and kernels/fused_attention.{cu,cpp} for graph on device.
Status synthesize_attention(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
