/// The filters a task must pass to be kept in a dataset or suite, each a named reason a task is
/// dropped. harness/task_check.py measures a task; judge_task() decides from the measurements,
/// so that every filter is a pure function of a JSON record and is tested as one.
///
/// The reasons, in the order they are judged:
///   crashed              the checking process died on the task (a segfault, an abort)
///   timed_out            the task ran past the time allowed for one task
///   fails_to_load        the file does not import, or its sizes cannot be scaled
///   fails_in_eager       Model(*get_init_inputs())(*get_inputs()) raises
///   nondeterministic     two calls on the same inputs disagree
///   output_near_zero     all-zero outputs pass the comparison (atol = rtol = 1e-2)
///   output_constant      one constant per output passes the comparison
///   insensitive_to_input another input draw, or another value of one input, gives the same answer
///   insensitive_to_weights  perturbing every weight gives the same answer
///   fails_under_compile  torch.compile raises, or disagrees with eager beyond tolerance
///   runtime_below_window / runtime_above_window  the eager forward's time is outside the window
///   too_similar          its graph is a near-copy of a task in a reference set
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cuda_agent {

struct DropReason {
  std::string name;    // one of the names above
  std::string detail;  // a sentence for a person
};

struct FilterPolicy {
  bool check_window = false;  // the window is a GPU figure; on the CPU it is off unless asked
  double window_min_ms = 0.5;
  double window_max_ms = 20;
};

/// Every reason the measured task is dropped (empty: kept). Reasons that follow from a failed
/// stage are not repeated: a task that fails in eager has no degeneracy verdict.
std::vector<DropReason> judge_task(const nlohmann::json& measurement, const FilterPolicy& policy);

}  // namespace cuda_agent
