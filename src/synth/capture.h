/// A task's graph, captured by the trusted harness (harness/capture.py, torch.export on the meta
/// device) in a sandboxed process and read back (graph.h). The synthesizer's first step, and what
/// `cuda-agent tasks graph` shows.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/process_runner.h"
#include "synth/graph.h"
#include "util/status.h"

namespace cuda_agent::synth {

struct CaptureOptions {
  std::string python = "python3";
  std::filesystem::path harness_dir;
  int shrink = 1;  // SCALABLE_SIZES divided by this (tasks/README.md)
  double timeout_s = 300;
  /// Python's pycache_prefix, the evaluator's (EvalOptions::bytecode_dir) where an evaluation
  /// follows: the capture then comes from the same fork server as the evaluation's trusted
  /// scripts, one torch import for both. Empty: Python's own __pycache__ folders.
  std::filesystem::path bytecode_dir;
};

/// Captures task's graph into *graph (and the document as written into *document when given).
/// A task that does not load or cannot be traced is an InvalidArgument with the harness's reason;
/// a harness that cannot run at all is an Internal error.
Status capture_graph(const std::filesystem::path& task, const CaptureOptions& options,
                     ProcessRunner* runner, Graph* graph, nlohmann::json* document = nullptr);

}  // namespace cuda_agent::synth
