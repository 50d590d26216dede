/// Composes new tasks from a typed library of PyTorch operators, with no model in the loop: the
/// data-synthesis half of an Ops-6K-style pipeline (`cuda-agent tasks synth`). Shapes and dtypes
/// propagate through each composition, so an invalid one is never emitted; rough value statistics
/// propagate too, so a degenerate one (an output a kernel computing nothing would match) is not
/// either. Sizes are chosen from a cost estimate so that eager PyTorch on the H200 takes a few
/// milliseconds; `tasks check` measures and filters what comes out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent {

/// The most operators one synthesized task composes, and the most tasks one call makes.
constexpr int kMaxSynthOps = 10;
constexpr int kMaxSynthCount = 100000;

struct SynthOptions {
  int count = 10;
  std::uint64_t seed = 0;
  int min_ops = 2;
  int max_ops = 5;
  /// Draws in a row that may yield no new task before the space counts as exhausted. A space
  /// with room left yields one every few draws; only a nearly used-up one goes this long without.
  int max_fruitless_draws = 20000;
};

struct SynthTask {
  std::string id;                // stable for (seed, index): "synth_s<seed>_<nnnn>"
  std::string source;            // a task file following tasks/README.md
  std::vector<std::string> ops;  // the operators composed, in order
};

/// Exactly options.count distinct tasks for options.seed; the same ones for the same options,
/// byte for byte, and task i the same whatever the count. No two share an operator sequence with
/// the same parameters and sizes. InvalidArgument for options out of range, or when the space of
/// compositions runs out before count distinct tasks are found.
Status synthesize_tasks(const SynthOptions& options, std::vector<SynthTask>* tasks);

}  // namespace cuda_agent
