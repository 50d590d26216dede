/// Reward recipes. A recipe reads only the evaluator's result, never anything the policy said.
///
/// "discrete" (the default, the CUDA Agent paper's): -1 when the candidate does not compile, is
/// wrong or breaks a rule; 3 when it is more than 5% faster than both eager and torch.compile;
/// 2 when more than 5% faster than eager only; 1 otherwise.
/// "log_speedup": ln(torch.compile time / candidate time) for a passing candidate, -1 otherwise;
/// always recorded beside the discrete reward.
#pragma once

#include <string>

#include "eval/result.h"
#include "util/status.h"

namespace cuda_agent {

constexpr double kSpeedupMargin = 1.05;

int discrete_reward(const EvalResult& result);
std::optional<double> log_speedup(const EvalResult& result);

/// Fills speedups, reward, reward_recipe and log_speedup from the times and outcome.
Status apply_reward(const std::string& recipe, EvalResult* result);

}  // namespace cuda_agent
