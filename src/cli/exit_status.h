/// The exit statuses every cuda-agent command shares, and how a command reports a failure that
/// leaves it without a verdict.
#pragma once

#include <iostream>

#include "util/status.h"

namespace cuda_agent {

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;   // a verdict against: a failing candidate, a dropped task, ...
constexpr int kExitError = 2;  // no verdict: bad arguments, a broken task, a missing tool
// No verdict, and none to be had by running again: the policy wrote no candidate for the task
// (the synthesizer has no plan for its ops). A bench records it as "no_plan".
constexpr int kExitNoCandidate = 3;

/// Prints the failure as one line on stderr and returns kExitError.
inline int fail(const Status& s) {
  std::cerr << "cuda-agent: " << s.message() << "\n";
  return kExitError;
}

}  // namespace cuda_agent
