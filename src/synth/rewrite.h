/// Rewrites that change the algorithm rather than the schedule, applied to a captured graph
/// before any plan sees it. Each is proved safe by the IR's shapes and arguments alone, never by
/// a task's name or sizes:
///   - dead_op: an op whose value reaches no output is dropped (work whose result is discarded);
///   - diag_matmul: a product with a diagonal matrix built from a vector is a scaling:
///     x @ diag(d) scales x's columns (x * d), diag(d) @ x its rows (x * d[:, None]), so a
///     dense GEMM of n^3 multiply-adds becomes one elementwise pass;
///   - batch_norm_eval: batch_norm in eval mode is a per-channel affine map, (x - mean) *
///     rsqrt(var + eps) * weight + bias over (C, 1, ...) views, so it fuses as elementwise ops;
///   - input_view: an unsqueeze of an input, parameter or buffer is a view ModelNew makes;
///   - library_op: a GEMM or convolution of inputs, parameters or buffers (or their transposes)
///     with ops after it runs in the library (cuBLAS, cuDNN) through torch, as a value ModelNew
///     computes first, and its bias joins the ops after it in the plan's fused kernel, so that
///     the library's output is read once and nothing else of torch's runs;
///   - group_norm: group_norm in G groups is an instance norm of x viewed (N, G, C / G, ...) and
///     the affine map by its weight and bias viewed (G, C / G, 1, ...); the other ops follow into
///     that view and ModelNew views the outputs back (Graph::output_view);
///   - distance: cosine_similarity, pairwise_distance and triplet_margin_loss, which aten keeps
///     as one op each, become the products, sums, norms and hinge they are made of, so that the
///     row plan reads each row once for all of its sums (cosine: x1.x2, |x1|^2, |x2|^2);
///   - cross_entropy: a per-sample cross entropy of class indices is each row's logsumexp less
///     its target's logit, picked as the row's sum where the position equals the target, which
///     the row plan takes in one pass (eager writes the whole log_softmax to gather from it);
///   - matrix_vector: a product of a matrix (or a batch) and a vector, bound by memory, is
///     the row reduction it is, sum(A * v, -1) or sum(v[:, None] * A, -2);
///   - identity_broadcast: getitem k of broadcast_tensors is operand k where the broadcast
///     leaves its shape as it is;
///   - slice_linears: linears of every slice of x along a dim other than its features
///     (x.select(d, i) for each i), with one weight and bias, are one linear of x, each slice's
///     result a select of it: a recurrence's input projection hoisted out of its steps, one GEMM
///     that fills the GPU where each step's small one leaves most of it idle;
///   - zero_sum: zeros + y (zeros_like, zeros, new_zeros) is y where y has the sum's shape and
///     dtype: an accumulator started at zero costs neither its allocation nor a read.
/// The evaluator checks every rewritten candidate against the unrewritten task on random inputs.
#pragma once

#include <string>
#include <vector>

#include "synth/graph.h"

namespace cuda_agent::synth {

struct AppliedRewrite {
  std::string name;    // "dead_op", "diag_matmul", "batch_norm_eval", "distance",
                       // "cross_entropy", "matrix_vector", "input_view", "library_op",
                       // "group_norm", "identity_broadcast", "slice_linears",
                       // "zero_sum"
  std::string detail;  // what it changed, for a person
};

/// Rewrites graph in place until no rule applies; returns what was applied, in order.
std::vector<AppliedRewrite> rewrite_graph(Graph* graph);

}  // namespace cuda_agent::synth
