/// The synthesizer's plan for a graph that no one kernel can take because it holds GEMMs or
/// convolutions: the graph becomes a pipeline of steps. Each GEMM and convolution is a library
/// step (cuBLAS and cuDNN, through the torch calls the evaluator's guard allows: F.linear,
/// torch.mm, torch.bmm, F.conv2d, ...), each view a Python step (view, transpose, getitem of a
/// split, ...: no data moves; zeros_like, an allocation), each cat and stack a copy step (the
/// pipeline's copy kernel writes each part into its slice of the result). These steps run in
/// the graph's order, each with just the other ops it reads run before it (the rest at the
/// end), and each maximal run of those other ops between two steps becomes the fewest fused
/// kernels that the elementwise, row, pooling and scan plans take (the longest prefix first),
/// each planned as if its ops were a task of their own whose inputs are the values they read
/// from earlier steps.
///
/// model_new.py holds the task's parameters and buffers and calls the steps in order; each
/// kernel's Python lives in a module of its own (synth_kernel<k>.py, imported by model_new.py)
/// with its own entry in the one kernel library (fused_elementwise_k<k>, fused_rows_k<k>,
/// fused_pool_k<k>, fused_scan_k<k>). Steps whose kernels would be the same files (the steps of
/// an unrolled recurrence: a kernel's reads are named by position) share one. A split or chunk
/// whose pieces only row and elementwise kernels read, in place, becomes pieces without views
/// (synth_piece.py: a shape, strides and an address each), a view op fewer at every call for
/// the evaluator's dispatch guard.
/// A strided view (by its recorded strides) that a kernel reads, or a reshape reshapes, is first
/// copied into contiguous memory by a copy kernel of its own (strided_copy, synth_copy.py).
/// A part of a cat or stack that an elementwise kernel or a pixel (un)shuffle's copy makes is
/// written into its slice of the result, where its other readers can read it there (cat_slots
/// in pipeline.cpp): the copy kernel copies only the other parts.
/// An attention written out, softmax(f(Q @ K^T)) @ V in float16 or bfloat16 (attention_plan.h),
/// is a step of its own: both GEMMs, f and the softmax in one kernel (fused_attention_k<k>)
/// that reads Q, K and V in place and never writes the scores.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "synth/graph.h"
#include "synth/tuning.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct PipelineStep {
  // kLibrary: a GEMM or convolution; kView: a view, or an allocation (zeros_like); kCopy: a cat
  // or stack through the copy kernel; kKernel: a run of ops fused into kernels; kAttention: an
  // attention's GEMMs, softmax and the ops between them, in one kernel.
  enum class Kind { kLibrary, kView, kCopy, kKernel, kAttention } kind = Kind::kKernel;
  std::vector<int> ops;      // the graph's ops it computes, in order
  std::vector<int> reads;    // kernels: the values it reads from outside the run, in order
  std::vector<int> outputs;  // kernels: the values it makes that later steps or the task return
  // Of what it reads, the strided views (a transpose's result, an item of a chunk) that a copy
  // kernel makes contiguous first: the fused kernels read their inputs contiguously, and a
  // reshape of a strided view would copy it with torch compute.
  std::vector<int> copied;
};

/// The steps of graph, or an InvalidArgument saying why it is no pipeline: it is one fused run
/// alone (the whole-graph plans are for that), an op no step takes (pooling, cat), or a step
/// whose torch call would compute (torch.matmul of two vectors is aten::dot). An item of a result
/// that the current run makes (getitem of max's values) stays in the run. attention: whether
/// attentions the attention kernel takes are steps of their own.
Status plan_pipeline(const Graph& graph, std::vector<PipelineStep>* steps, bool attention = true);

/// The attentions of graph that the attention kernel takes (attention_plan.h), as steps of kind
/// kAttention by the index of their last op (the second GEMM): each reads Q, K^T and V (and
/// f's tensors) in place, as the GEMMs read them.
std::map<int, PipelineStep> attention_steps(const Graph& graph);

/// The run of ops of a kernel step as a graph of its own: the values it reads are its inputs
/// (under their names in graph, as plain inputs), its outputs the step's.
Graph step_graph(const Graph& graph, const PipelineStep& step);

/// The candidate for graph on device: model_new.py, a synth_step<k>.py and a kernel source per
/// kernel step, the default launch configuration of each; or an InvalidArgument naming the
/// step no plan takes and why. Where it has attention steps, its fallback is the pipeline
/// without them (attention's GEMMs in the library, the ops between them a row kernel).
Status synthesize_pipeline(const Graph& graph, const std::string& device, Candidate* candidate);

}  // namespace cuda_agent::synth
