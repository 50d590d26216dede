#include "rl/advantage.h"

#include <cmath>
#include <numeric>

namespace cuda_agent::rl {

Status check_estimator(const std::string& estimator) {
  if (estimator == "grpo" || estimator == "grpo_mean") return Status::OK();
  return Status::InvalidArgument("unknown advantage estimator '" + estimator +
                                 "' (known: grpo, grpo_mean)");
}

std::vector<double> group_advantages(const std::vector<double>& rewards,
                                     const std::string& estimator) {
  const std::size_t n = rewards.size();
  std::vector<double> advantages(n, 0.0);
  if (n < 2) return advantages;  // no group to compare with
  const double mean = std::accumulate(rewards.begin(), rewards.end(), 0.0) / n;
  double squares = 0;
  for (double r : rewards) squares += (r - mean) * (r - mean);
  const double std_dev = std::sqrt(squares / (n - 1));
  for (std::size_t i = 0; i < n; ++i) {
    advantages[i] = rewards[i] - mean;
    if (estimator == "grpo") advantages[i] /= std_dev + kAdvantageEpsilon;
  }
  return advantages;
}

std::vector<double> discounted_returns(int turns, double reward, double gamma) {
  std::vector<double> returns(std::max(turns, 0));
  double value = reward;
  for (int t = turns - 1; t >= 0; --t) {
    returns[t] = value;
    value *= gamma;
  }
  return returns;
}

}  // namespace cuda_agent::rl
