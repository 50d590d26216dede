/// Reward recipes. A recipe reads only the evaluator's result, never anything the policy said,
/// and any rule broken scores as low as a candidate that does not compile, whatever the recipe.
///
/// "discrete" (the default, the CUDA Agent paper's): -1 when the candidate does not compile, is
/// wrong or breaks a rule; 3 when it is more than 5% faster than both eager and torch.compile;
/// 2 when more than 5% faster than eager only; 1 otherwise.
/// "log_speedup": ln(torch.compile time / candidate time) for a passing candidate (0 when it was
/// not timed), -1 otherwise; always recorded beside the discrete reward.
/// "milestone": the discrete steps with partial credit below and above them: -1 when it does not
/// compile or breaks a rule, -0.5 when it compiles but fails verification (wrong, raises, crashes
/// or hangs), 1, 2 or 3 as discrete, and 0.5 more for each of 1.5x and 2x over torch.compile
/// (at most 4).
#pragma once

#include <string>
#include <vector>

#include "eval/result.h"
#include "util/status.h"

namespace cuda_agent {

constexpr double kSpeedupMargin = 1.05;

struct RewardRecipe {
  std::string name;
  std::string summary;  // one line for --help and errors
};

/// Every recipe, the default first.
const std::vector<RewardRecipe>& reward_recipes();
/// "discrete, log_speedup, milestone".
std::string recipe_names();

int discrete_reward(const EvalResult& result);
std::optional<double> log_speedup(const EvalResult& result);

/// OK for a known recipe; InvalidArgument naming the known ones otherwise.
Status check_recipe(const std::string& recipe);

/// The value recipe gives result: what a trainer is handed. InvalidArgument for an unknown
/// recipe.
Status recipe_value(const std::string& recipe, const EvalResult& result, double* value);

/// Fills speedups, reward (the discrete one, whatever the recipe), reward_recipe, reward_value
/// (the recipe's) and log_speedup from the times and outcome.
Status apply_reward(const std::string& recipe, EvalResult* result);

}  // namespace cuda_agent
